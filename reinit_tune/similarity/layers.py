"""Layer-by-layer comparison of two BERT-family encoders on the same dev examples.

``compare_models`` runs both models over batches of dev examples once and returns one row
per layer (``reinit_tune.store.SIMILARITY_SCHEMA``): SVCCA distance and linear CKA of the
token representations, the attention Jensen–Shannon divergence (002 §3), the weight
distances of the six linear projections (000 §4.5), and, when asked, 002 §4's layer
replacement: the SVCCA distance between the last-layer representations of model ``a`` and
of ``a`` with layer l's parameters put back to ``b``'s. Layer 0 is the embedding output,
layer l the output of encoder layer l (1-based, as 002's figures and the probing rows).

A trial calls it at its end with ``a`` = the finetuned model and ``b`` = the same model just
before finetuning (the pretrained checkpoint with the trial's surgery applied, so for
trials without surgery exactly the pretrained checkpoint). ``reinit_tune.similarity.compare``
(``reinit-tune compare``) calls it on two saved models (seed vs seed, task vs task; 002 §5).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator

import torch
from torch import nn

from reinit_tune.errors import InputError
from reinit_tune.model.stacks import locate
from reinit_tune.model.surgery import layer_stack
from reinit_tune.similarity import measures as sim
from reinit_tune.store import WEIGHT_PROJECTIONS


def projection_weights(model: nn.Module) -> dict[str, str]:
    """Short name (``store.WEIGHT_PROJECTIONS``) → parameter name inside one block of
    ``model``'s architecture; a projection the architecture does not have separately (GPT-2's
    fused query/key/value) is left out, and its distance columns stay null."""
    arch = locate(model).arch
    paths = (arch.query, arch.key, arch.value, arch.output,
             arch.mlp_in[0] if arch.mlp_in else None, arch.mlp_out)
    return {short: f"{path}.weight" for short, path in zip(WEIGHT_PROJECTIONS, paths,
                                                           strict=True) if path}


BATCH_SIZE = 32  # attention maps of every layer are held per batch: keep batches modest


def encoder(model: nn.Module) -> nn.Module:
    """The encoder (``BertModel``) of a task model; an encoder itself is returned as is."""
    return getattr(model, "base_model", model)


@contextlib.contextmanager
def _eager_eval(model: nn.Module) -> Iterator[None]:
    """Eval mode with eager attention (SDPA returns no attention maps); restored after."""
    implementation = model.config._attn_implementation
    training = model.training
    model.set_attn_implementation("eager")
    model.eval()
    try:
        yield
    finally:
        model.set_attn_implementation(implementation)
        model.train(training)


def _inputs(batch: dict, device: torch.device) -> dict:
    keys = ("input_ids", "token_type_ids", "attention_mask")
    return {k: batch[k].to(device) for k in keys if k in batch}


def _layer_prefix(model: nn.Module, layer: nn.Module) -> str:
    return next(name for name, module in model.named_modules() if module is layer)


@torch.no_grad()
def compare_models(
    a: nn.Module,
    b: nn.Module,
    batches: Iterable[dict],
    *,
    layer_replacement: bool = False,
) -> list[dict]:
    """One row per layer 0..L comparing encoders ``a`` and ``b`` (see module docstring).

    ``batches`` are dicts with ``input_ids``, ``attention_mask`` (and ``token_type_ids``);
    both models see the same tokens. ``b`` is moved to ``a``'s device. Forward passes run in
    float32 without autocast, whatever precision the models were trained in.
    """
    a, b = encoder(a), encoder(b)
    layers_a, layers_b = layer_stack(a), layer_stack(b)
    if len(layers_a) != len(layers_b):
        raise InputError(f"models differ in depth: {len(layers_a)} vs {len(layers_b)} layers")
    device = next(a.parameters()).device
    b.to(device)
    n_layers = len(layers_a)
    moments = [sim.CrossMoments() for _ in range(n_layers + 1)]
    replaced = [sim.CrossMoments() for _ in range(n_layers)] if layer_replacement else []
    js_sum = torch.zeros(n_layers, dtype=torch.float64, device=device)
    examples = 0
    overrides = []
    if layer_replacement:
        overrides = [
            {f"{_layer_prefix(a, layers_a[i])}.{name}": p
             for name, p in layers_b[i].named_parameters()}
            for i in range(n_layers)
        ]
    with _eager_eval(a), _eager_eval(b), torch.autocast(device.type, enabled=False):
        for batch in batches:
            inputs = _inputs(batch, device)
            out_a = a(**inputs, output_hidden_states=True, output_attentions=True)
            out_b = b(**inputs, output_hidden_states=True, output_attentions=True)
            mask = inputs["attention_mask"].bool()
            for layer, (ha, hb) in enumerate(zip(out_a.hidden_states, out_b.hidden_states,
                                                 strict=True)):
                moments[layer].update(ha[mask], hb[mask])
            for i, (pa, pb) in enumerate(zip(out_a.attentions, out_b.attentions, strict=True)):
                js_sum[i] += sim.attention_js_divergence(pa, pb, inputs["attention_mask"]).sum()
            last = out_a.last_hidden_state[mask]
            for i, override in enumerate(overrides):
                swapped = torch.func.functional_call(a, override, args=(), kwargs=inputs)
                replaced[i].update(swapped.last_hidden_state[mask], last)
            examples += mask.shape[0]
    if examples == 0:
        raise InputError("no examples to compare")

    weights = projection_weights(a)
    rows = []
    for layer in range(n_layers + 1):
        row = {"layer": layer, "examples": examples, "samples": moments[layer].n,
               "cka": sim.cka_from_moments(moments[layer])}
        notes = []
        try:
            result = sim.svcca_from_moments(moments[layer])
            row.update(svcca_distance=result.distance, svcca_dims_a=result.dims[0],
                       svcca_dims_b=result.dims[1])
        except ValueError as e:  # InsufficientSamplesError included: say why, store null
            notes.append(f"svcca: {e}")
        if layer >= 1:
            row["attention_js"] = float(js_sum[layer - 1]) / examples
            row.update(_projection_distances(layers_a[layer - 1], layers_b[layer - 1], weights))
            if layer_replacement:
                try:
                    row["replaced_svcca"] = sim.svcca_from_moments(replaced[layer - 1]).distance
                except ValueError as e:
                    notes.append(f"replaced_svcca: {e}")
        row["note"] = "; ".join(notes) or None
        rows.append(row)
    return rows


def _projection_distances(layer_a: nn.Module, layer_b: nn.Module,
                          weights: dict[str, str]) -> dict[str, float]:
    params_a = dict(layer_a.named_parameters())
    params_b = dict(layer_b.named_parameters())
    wanted = {path: short for short, path in weights.items() if path in params_a}
    distances = sim.weight_distances({p: params_a[p] for p in wanted}, params_b)
    out = {}
    for path, short in wanted.items():
        out[f"w_{short}_fro"] = distances[path]["fro"]
        out[f"w_{short}_spectral"] = distances[path]["spectral"]
    return out


def pretrained_distances(model: nn.Module, pretrained: nn.Module) -> dict[int, float]:
    """000 §4.5 as the authors' code computes it: per layer l (1-based), the spectral norm of
    the ``output.dense`` weights of ``model`` minus those of the ``pretrained`` checkpoint at
    the same position, whatever surgery the model started from."""
    distances = {}
    name = projection_weights(model)["output"]
    for i, (a, b) in enumerate(zip(layer_stack(encoder(model)), layer_stack(encoder(pretrained)),
                                   strict=True)):
        found = sim.weight_distances({name: dict(a.named_parameters())[name]},
                                     dict(b.named_parameters()))
        distances[i + 1] = found[name]["spectral"]
    return distances


def json_safe(rows: list[dict]) -> list[dict]:
    """NaN → None, so rows survive a JSON round trip through Tune's results."""
    return [{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()}
            for r in rows]
