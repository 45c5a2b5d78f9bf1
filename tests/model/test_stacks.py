"""Every surgery on every supported architecture, on tiny random models saved like a user's
checkpoint: untouched tensors bit-identical, reinitialized parts with the right statistics,
head slices only, permuted positions equal to the pretrained blocks they copy; ALBERT and
unknown architectures refused."""

from __future__ import annotations

import pytest
import torch

from reinit_tune import TrialConfig, data
from reinit_tune.errors import InputError
from reinit_tune.model import build, stacks, surgery
from reinit_tune.training.probe import truncated
from tests.helpers import FAMILIES, save_tiny_model

STD = 0.02


@pytest.fixture(scope="module", params=FAMILIES)
def folder(request, tmp_path_factory) -> tuple[str, str]:
    family = request.param
    return family, str(save_tiny_model(tmp_path_factory.mktemp(family), family))


def loaded(folder: str, task: str = "rte"):
    return build.load_pretrained(folder, task)


def params(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def block_prefix(model, block: int) -> str:
    layer = stacks.locate(model).layers[block]
    return next(name for name, m in model.named_modules() if m is layer) + "."


def test_the_locator_finds_blocks_heads_and_roles(folder):
    family, path = folder
    model = loaded(path)
    stack = stacks.locate(model)
    assert len(stack.layers) == 3 and stack.num_heads == 4 and stack.head_size == 8
    assert stack.num_kv_heads == (2 if family == "llama" else 4)
    roles = ["output", "mlp_out", *(["qkv"] if stack.arch.qkv else ["query", "key", "value"])]
    for role in roles:
        assert isinstance(stack.part(1, role), torch.nn.Module)


def test_reinitializing_a_block_changes_it_alone_with_the_papers_initializer(folder):
    family, path = folder
    model = loaded(path)
    before = params(model)
    surgery.reinit_layers(model, [1], std=STD, seed=0)
    after = params(model)
    prefix = block_prefix(model, 1)
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(k.startswith(prefix) for k in changed), sorted(changed)[:5]
    weights = torch.cat([after[k].flatten() for k in changed
                         if k.endswith("weight") and after[k].dim() == 2])
    assert weights.abs().max() <= 2 * STD + 1e-7  # truncated at 2 sigma (003 App. A)
    assert 0.8 * 0.88 * STD < weights.std() < 1.2 * 0.88 * STD
    for name, value in after.items():
        if name.startswith(prefix) and value.dim() == 1:
            norm = "norm" in name.lower() or name.endswith(("ln_1.weight", "ln_2.weight"))
            expected = 1.0 if norm and name.endswith("weight") else 0.0
            assert torch.all(value == expected), name


def test_reinitializing_a_head_changes_only_its_slices(folder):
    family, path = folder
    model = loaded(path)
    stack = stacks.locate(model)
    before = params(model)
    surgery.reinit_heads(model, [(2, 1)], std=STD, seed=0)
    after = params(model)
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    prefix = block_prefix(model, 2)
    assert changed and all(k.startswith(prefix) for k in changed)
    rows = slice(8, 16)
    for name in changed:
        diff = before[name] != after[name]
        mask = torch.zeros_like(diff)
        if stack.arch.qkv and "c_attn" in name:  # fused [q | k | v] columns
            for block in range(3):
                if diff.dim() == 2:
                    mask[:, block * 32 + 8: block * 32 + 16] = True
                else:
                    mask[block * 32 + 8: block * 32 + 16] = True
        elif stack.arch.qkv:  # c_proj: the head's input rows
            mask[rows] = True
        elif name.endswith(stack.arch.output + ".weight"):
            mask[:, rows] = True
        else:
            mask[rows] = True
        assert not (diff & ~mask).any(), name
    if family == "llama":  # grouped-query attention: the shared key/value head is kept
        assert not any(("k_proj" in k or "v_proj" in k) for k in changed)


def test_a_permutation_puts_pretrained_block_order_i_at_position_i(folder):
    _, path = folder
    model = loaded(path)
    original = [params(layer) for layer in stacks.locate(model).layers]
    surgery.permute_layers(model, [2, 0, 1])
    for position, source in enumerate([2, 0, 1]):
        now = params(stacks.locate(model).layers[position])
        assert all(torch.equal(now[k], original[source][k]) for k in now)


def test_every_family_builds_trains_a_batch_and_probes(folder, glue_dir):
    family, path = folder
    config = TrialConfig(path, "rte", train_size=16, seed=0, reinit_layers=(2,),
                         reinit_heads=((0, 1),), layer_order=(1, 0, 2), max_seq_length=32)
    model = build.build_model(config)
    train = data.encoded_split("rte", "train", path, 32, glue_dir)
    batch = train.collate(list(range(4)))
    assert ("token_type_ids" in batch) == (family in ("bert", "electra"))  # the others: none
    out = model(**batch)
    assert torch.isfinite(out.loss)
    out.loss.backward()
    with truncated(model, 1) as base:
        hidden = base(**{k: v for k, v in batch.items() if k != "labels"}).last_hidden_state
        assert len(stacks.locate(model).layers) == 1
    assert torch.isfinite(hidden).all() and len(stacks.locate(model).layers) == 3
    head = surgery.classifier_head(model)
    assert head.out_features == 2


def test_albert_and_unknown_architectures_are_refused():
    with pytest.raises(InputError, match="shares one set of weights"):
        stacks.architecture("albert")
    with pytest.raises(InputError, match="architecture 't5' is not supported"):
        stacks.architecture("t5")


ARCHITECTURES = ("roberta", "distilbert", "gpt2", "llama")


@pytest.fixture(scope="module")
def architectures_store(ray_local, glue_dir, tmp_path_factory):
    """One sweep of the four architectures together (k = 0 and 2 each), as a user's store
    mixing models holds them: its summary and the folder of each architecture's model."""
    from reinit_tune import families
    from reinit_tune.families import Grid
    from reinit_tune.sweep.options import RunOptions
    from reinit_tune.sweep.runner import run_sweep

    root = tmp_path_factory.mktemp("architectures")
    paths = {f: str(save_tiny_model(root / f, f)) for f in ARCHITECTURES}
    configs = [c for path in paths.values() for c in families.get("progressive").configs(
        Grid(path, tasks=("rte",), sizes=(16,), seeds=1, epochs=1, lr=1e-4, max_seq_length=32,
             data_dir=str(glue_dir)), k=[0, 2])]
    summary = run_sweep(configs, RunOptions(results_dir=root / "results",
                                            data_dir=str(glue_dir), max_failures=0))
    return summary, paths, root / "results"


@pytest.mark.ray
@pytest.mark.parametrize("family", ARCHITECTURES)
def test_a_sweep_on_another_architecture_runs_into_the_store(family, architectures_store):
    from reinit_tune import store

    summary, paths, results = architectures_store
    assert (summary.ok, summary.failed) == (2 * len(ARCHITECTURES), 0), str(summary)
    trials = store.load_trials(results)
    own = trials[trials["model"] == paths[family]]
    assert sorted(own["num_pretrained_layers"]) == [0, 2] and (own["status"] == "ok").all()
    assert own["score"].between(0, 1).all() and (own["num_layers"] == 3).all()


def test_similarity_compares_every_family_per_layer(folder, glue_dir):
    import copy

    from reinit_tune.similarity.layers import compare_models, pretrained_distances

    family, path = folder
    model = loaded(path)
    other = copy.deepcopy(model)
    surgery.reinit_layers(other, [2], std=STD, seed=0)
    dev = data.encoded_split("rte", "validation", path, 32, glue_dir)
    batches = [{k: v for k, v in dev.collate(list(range(i, i + 8))).items() if k != "labels"}
               for i in (0, 8)]
    rows = compare_models(model, other, batches)
    assert [r["layer"] for r in rows] == [0, 1, 2, 3]
    assert rows[1]["cka"] == pytest.approx(1.0) and rows[3]["cka"] < 0.999
    assert rows[1]["attention_js"] == pytest.approx(0.0, abs=1e-6) and rows[3]["attention_js"] > 0
    assert rows[3]["w_output_fro"] > 0 and rows[1]["w_output_fro"] == 0
    if family != "gpt2":  # GPT-2 fuses query/key/value: no separate distance for them
        assert rows[3]["w_query_fro"] > 0
    assert set(pretrained_distances(other, model)) == {1, 2, 3}
