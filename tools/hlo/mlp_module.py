#!/usr/bin/env python3
"""Writes the HLO module of podsim's built-in MLP training step (workload.model: mlp, SGD), as JAX would lower it
before XLA's optimizations: dense layers with bias and ReLU, a softmax cross-entropy averaged over the batch, the
backward pass and the SGD update, one device or data parallel over D devices (the gradients all-reduced).

    python3 tools/hlo/mlp_module.py --batch 512 --input 1024 --hidden 2048 --layers 2 --classes 1024 \\
        [--devices 4] [--lr 0.01] > mlp.hlo

tests/data/hlo/mlp_*.hlo were written by it; tests/cli/hlo_test.cpp runs each against podsim's own MLP.
"""
import argparse


def main():
    ap = argparse.ArgumentParser()
    for k, d in (("batch", 512), ("input", 1024), ("hidden", 2048), ("layers", 2), ("classes", 1024), ("devices", 1)):
        ap.add_argument("--" + k, type=int, default=d)
    ap.add_argument("--lr", type=float, default=0.01)
    a = ap.parse_args()
    D = a.devices
    B, I, H, L, C = a.batch // D, a.input, a.hidden, a.layers, a.classes
    lines = []
    out = lines.append
    params = []  # (name, shape)
    widths = [I] + [H] * L
    for l in range(L):
        params += [("w%d" % l, "f32[%d,%d]" % (widths[l], H)), ("b%d" % l, "f32[%d]" % H)]
    params += [("wo", "f32[%d,%d]" % (H, C)), ("bo", "f32[%d]" % C)]
    n = len(params)
    alias = ", ".join("{%d}: (%d, {}, may-alias)" % (i, i) for i in range(n))
    head = "HloModule jit_train_step, input_output_alias={ %s }" % alias
    if D > 1:
        head += ", num_partitions=%d" % D
    out(head)
    out("")
    out("%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
        "  ROOT %s = f32[] add(%a, %b)\n}\n")
    out("%max (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
        "  ROOT %m = f32[] maximum(%a, %b)\n}\n")
    sig = ", ".join("%s: %s" % (p, s) for p, s in params) + ", x: f32[%d,%d], labels: s32[%d]" % (B, I, B)
    res = ", ".join(s for _, s in params) + ", f32[]"
    out("ENTRY %%main (%s) -> (%s) {" % (sig, res))
    for i, (p, s) in enumerate(params):
        shard = ", sharding={replicated}" if D > 1 else ""
        out("  %%%s = %s parameter(%d)%s" % (p, s, i, shard))
    shard = ", sharding={devices=[%d,1]<=[%d]}" % (D, D) if D > 1 else ""
    out("  %%x = f32[%d,%d] parameter(%d)%s" % (B, I, n, shard))
    shard = ", sharding={devices=[%d]<=[%d]}" % (D, D) if D > 1 else ""
    out("  %%labels = s32[%d] parameter(%d)%s" % (B, n + 1, shard))
    out("  %zero = f32[] constant(0)")
    # forward
    act = "x"
    for l in range(L):
        out("  %%h%d = f32[%d,%d] dot(%%%s, %%w%d), lhs_contracting_dims={1}, rhs_contracting_dims={0}" % (l, B, H, act, l))
        out("  %%bb%d = f32[%d,%d] broadcast(%%b%d), dimensions={1}" % (l, B, H, l))
        out("  %%z%d = f32[%d,%d] add(%%h%d, %%bb%d)" % (l, B, H, l, l))
        out("  %%zb%d = f32[%d,%d] broadcast(%%zero), dimensions={}" % (l, B, H))
        out("  %%a%d = f32[%d,%d] maximum(%%z%d, %%zb%d)" % (l, B, H, l, l))
        act = "a%d" % l
    out("  %%ho = f32[%d,%d] dot(%%%s, %%wo), lhs_contracting_dims={1}, rhs_contracting_dims={0}" % (B, C, act))
    out("  %%bbo = f32[%d,%d] broadcast(%%bo), dimensions={1}" % (B, C))
    out("  %%logits = f32[%d,%d] add(%%ho, %%bbo)" % (B, C))
    # softmax cross-entropy, mean over the global batch
    out("  %ninf = f32[] constant(-inf)")
    out("  %%m = f32[%d] reduce(%%logits, %%ninf), dimensions={1}, to_apply=%%max" % B)
    out("  %%mb = f32[%d,%d] broadcast(%%m), dimensions={0}" % (B, C))
    out("  %%sh = f32[%d,%d] subtract(%%logits, %%mb)" % (B, C))
    out("  %%e = f32[%d,%d] exponential(%%sh)" % (B, C))
    out("  %%s = f32[%d] reduce(%%e, %%zero), dimensions={1}, to_apply=%%add" % B)
    out("  %%ls = f32[%d] log(%%s)" % B)
    out("  %%iota = s32[%d,%d] iota(), iota_dimension=1" % (B, C))
    out("  %%lb = s32[%d,%d] broadcast(%%labels), dimensions={0}" % (B, C))
    out("  %%oh = pred[%d,%d] compare(%%lb, %%iota), direction=EQ" % (B, C))
    out("  %%ohf = f32[%d,%d] convert(%%oh)" % (B, C))
    out("  %%t = f32[%d,%d] multiply(%%sh, %%ohf)" % (B, C))
    out("  %%tl = f32[%d] reduce(%%t, %%zero), dimensions={1}, to_apply=%%add" % B)
    out("  %%nll = f32[%d] subtract(%%ls, %%tl)" % B)
    out("  %nsum = f32[] reduce(%%nll, %%zero), dimensions={0}, to_apply=%%add".replace("%%", "%"))
    out("  %%invb = f32[] constant(%r)" % (1.0 / a.batch))
    if D > 1:
        out("  %%lsum = f32[] all-reduce(%%nsum), channel_id=100, replica_groups=[1,%d]<=[%d], "
            "use_global_device_ids=true, to_apply=%%add" % (D, D))
        out("  %loss = f32[] multiply(%lsum, %invb)")
    else:
        out("  %loss = f32[] multiply(%nsum, %invb)")
    # backward: dlogits = (softmax - onehot) / batch
    out("  %%sb = f32[%d,%d] broadcast(%%s), dimensions={0}" % (B, C))
    out("  %%p = f32[%d,%d] divide(%%e, %%sb)" % (B, C))
    out("  %%d = f32[%d,%d] subtract(%%p, %%ohf)" % (B, C))
    out("  %%ib = f32[%d,%d] broadcast(%%invb), dimensions={}" % (B, C))
    out("  %%dlogits = f32[%d,%d] multiply(%%d, %%ib)" % (B, C))
    grads = {}
    out("  %%gwo = f32[%d,%d] dot(%%%s, %%dlogits), lhs_contracting_dims={0}, rhs_contracting_dims={0}" % (H, C, act))
    out("  %%gbo = f32[%d] reduce(%%dlogits, %%zero), dimensions={0}, to_apply=%%add" % C)
    grads["wo"], grads["bo"] = "gwo", "gbo"
    dy = "dlogits"
    w = "wo"
    for l in reversed(range(L)):
        out("  %%da%d = f32[%d,%d] dot(%%%s, %%%s), lhs_contracting_dims={1}, rhs_contracting_dims={1}" % (l, B, H, dy, w))
        out("  %%pos%d = pred[%d,%d] compare(%%z%d, %%zb%d), direction=GT" % (l, B, H, l, l))
        out("  %%dz%d = f32[%d,%d] select(%%pos%d, %%da%d, %%zb%d)" % (l, B, H, l, l, l))
        inp = "x" if l == 0 else "a%d" % (l - 1)
        out("  %%gw%d = f32[%d,%d] dot(%%%s, %%dz%d), lhs_contracting_dims={0}, rhs_contracting_dims={0}"
            % (l, widths[l], H, inp, l))
        out("  %%gb%d = f32[%d] reduce(%%dz%d, %%zero), dimensions={0}, to_apply=%%add" % (l, H, l))
        grads["w%d" % l], grads["b%d" % l] = "gw%d" % l, "gb%d" % l
        dy, w = "dz%d" % l, "w%d" % l
    # gradients all-reduced over the data-parallel devices, then SGD
    out("  %%lr = f32[] constant(%r)" % a.lr)
    new = []
    for k, (p, s) in enumerate(params):
        g = grads[p]
        if D > 1:
            out("  %%%s.sum = %s all-reduce(%%%s), channel_id=%d, replica_groups=[1,%d]<=[%d], "
                "use_global_device_ids=true, to_apply=%%add" % (g, s, g, k + 1, D, D))
            g = g + ".sum"
        dims = s[s.index("[") + 1:s.index("]")]
        out("  %%lr.%s = %s broadcast(%%lr), dimensions={}" % (p, s))
        out("  %%step.%s = %s multiply(%%%s, %%lr.%s)" % (p, s, g, p))
        out("  %%%s.new = %s subtract(%%%s, %%step.%s)" % (p, s, p, p))
        new.append("%" + p + ".new")
    out("  ROOT %%out = (%s) tuple(%s, %%loss)" % (res, ", ".join(new)))
    out("}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
