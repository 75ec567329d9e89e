"""AdamW inside the backward (tt_optim.OptimizerInBackward): each transformer layer's parameters are updated as soon as
autograd has accumulated that layer's gradients, and the result is exactly that of one AdamW step after the backward.
On a CPU the parts run inline (there is no side stream); the GPU path differs only in the stream they are queued on."""
from __future__ import annotations

import pytest
import torch

import tt_model
import tt_optim
import tt_train

CPU = torch.device("cpu")


def _v1_bf16(tiny_cfg, seed=3):
    """A v1 (eager PyTorch ops) model with bf16 parameters and fp32 master weights, plus its MasterAdamW."""
    torch.manual_seed(seed)
    model = tt_model.TinyLlama(tiny_cfg, tt_model.Ops())
    weights = tt_optim.use_low_precision_params(model)
    return model, tt_optim.MasterAdamW(weights, lr=1e-2, weight_decay=0.1)


def _loss(model, tokens):
    x, y = tt_train.split_batches(tokens)
    return model.ops.loss(model(x), y)


def test_layer_parts_follow_the_backward_order(tiny_cfg):
    model, opt = _v1_bf16(tiny_cfg)
    parts = tt_optim.layer_parts(model, opt.weights)
    names = {id(p): n for n, p in model.named_parameters()}
    named = [[names[id(opt.weights.params[i])] for i in part] for part in parts]
    assert len(parts) == tiny_cfg.num_layers + 1
    for k, part in enumerate(named[:-1]):  # last layer first
        assert all(n.startswith(f"layers.{tiny_cfg.num_layers - 1 - k}.") for n in part), part
    assert sorted(named[-1]) == ["norm", "tok_emb.weight"]
    assert sorted(i for part in parts for i in part) == list(range(len(opt.weights.params)))


def test_updates_inside_the_backward_equal_one_step_after_it(tiny_cfg):
    """Same weights, same batches, 3 steps: the master weights, both moments and the bf16 parameters match the
    one-launch step exactly, and every part ran before the backward ended, the embedding's part last."""
    ref_model, ref_opt = _v1_bf16(tiny_cfg)
    model, opt = _v1_bf16(tiny_cfg)
    overlap = tt_train.make_overlap(model, opt, CPU, "on")
    assert overlap is not None and overlap.side is None
    emb = model.tok_emb.weight
    seen = []  # (part, was the embedding's gradient there yet?) at each part's update
    run_part = opt.step_part

    def logged_part(k):
        seen.append((k, emb.grad is not None))
        run_part(k)
    opt.step_part = logged_part  # type: ignore[method-assign]
    tokens = tt_train.make_tokens("random", 3, 2, 16, tiny_cfg.vocab_size, 0, CPU)
    for i in range(3):
        ref_opt.zero_grad(set_to_none=True)
        _loss(ref_model, tokens[i]).backward()
        ref_opt.step()
        opt.zero_grad(set_to_none=True)
        seen.clear()
        with overlap.step():
            _loss(model, tokens[i]).backward()
        n_parts = tiny_cfg.num_layers + 1
        assert [k for k, _ in seen] == list(range(n_parts)) == overlap.launched
        assert [has_emb for _, has_emb in seen] == [False] * (n_parts - 1) + [True]
        for got, want in ((opt.weights.master, ref_opt.weights.master), (opt.exp_avg, ref_opt.exp_avg),
                          (opt.exp_avg_sq, ref_opt.exp_avg_sq), (opt.weights.low, ref_opt.weights.low)):
            assert torch.equal(got, want)
    assert float(opt.step_count) == float(ref_opt.step_count) == 3.0
    assert not torch.equal(opt.weights.master, tt_optim.use_low_precision_params(
        tt_model.TinyLlama(tiny_cfg, tt_model.Ops())).master)  # (the weights did move)


def test_a_part_without_gradients_is_an_error_and_plain_backwards_update_nothing(tiny_cfg):
    model, opt = _v1_bf16(tiny_cfg)
    overlap = tt_train.make_overlap(model, opt, CPU, "on")
    tokens = tt_train.make_tokens("random", 1, 2, 16, tiny_cfg.vocab_size, 0, CPU)
    before = opt.weights.master.clone()
    _loss(model, tokens[0]).backward()  # outside step(): a gradient check, not an optimizer step
    assert torch.equal(opt.weights.master, before) and float(opt.step_count) == 0.0
    opt.zero_grad(set_to_none=True)
    x, _ = tt_train.split_batches(tokens[0])
    with pytest.raises(RuntimeError, match="got no gradient"), overlap.step():
        model.tok_emb(x).float().sum().backward()  # only the embedding trains: every layer's part is missing


def test_make_overlap_choices(tiny_cfg):
    model, opt = _v1_bf16(tiny_cfg)
    assert tt_train.make_overlap(model, opt, CPU, "auto") is None  # a GPU default only
    assert tt_train.make_overlap(model, opt, CPU, "off") is None
    plain = torch.optim.AdamW(tt_model.TinyLlama(tiny_cfg, tt_model.Ops()).parameters())
    with pytest.raises(ValueError, match="fp32-master AdamW"):
        tt_train.make_overlap(model, plain, CPU, "on")
    with pytest.raises(ValueError, match="must be one of"):
        tt_train.make_overlap(model, opt, CPU, "sometimes")
