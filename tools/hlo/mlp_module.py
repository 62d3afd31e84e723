#!/usr/bin/env python3
"""Writes the HLO module of podsim's built-in MLP training step (workload.model: mlp, SGD), as JAX would lower it
before XLA's optimizations: dense layers with bias and ReLU, a softmax cross-entropy averaged over the batch, the
backward pass and the SGD update, one device or data parallel over D devices (the gradients all-reduced).
With --fused, the module after optimizations instead (one device): its fusions are the kernels podsim's own fusion
pass makes of the built-in MLP step (a matmul with its bias and ReLU, the loss with its gradient, an input gradient
with the gradient of the ReLU below it, a bias gradient alone, the first layer's weight gradient with its update), in
the order podsim issues them. The unfused module takes each ReLU's gradient mask from its input (x > 0), as
jax.nn.relu's gradient does; the fused one from its output (a > 0, the same mask), as podsim's ReluGrad does, so that
the pre-activation is not kept and each dense kernel writes the ReLU's output alone.

    python3 tools/hlo/mlp_module.py --batch 512 --input 1024 --hidden 2048 --layers 2 --classes 1024 \\
        [--devices 4 | --fused] [--lr 0.01] > mlp.hlo

tests/data/hlo/mlp_*.hlo were written by it; tests/cli/hlo_test.cpp runs each against podsim's own MLP.
"""
import argparse


def main():
    ap = argparse.ArgumentParser()
    for k, d in (("batch", 512), ("input", 1024), ("hidden", 2048), ("layers", 2), ("classes", 1024), ("devices", 1)):
        ap.add_argument("--" + k, type=int, default=d)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--fused", action="store_true")
    a = ap.parse_args()
    if a.fused:
        return fused(a)
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


def fused(a):
    B, I, H, L, C = a.batch, a.input, a.hidden, a.layers, a.classes
    widths = [I] + [H] * L
    comps, entry = [], []
    c, e = comps.append, entry.append
    c("%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
      "  ROOT %s = f32[] add(%a, %b)\n}\n")
    c("%max (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
      "  ROOT %m = f32[] maximum(%a, %b)\n}\n")
    # A dense layer: matmul, bias, ReLU; only the ReLU's output leaves the kernel (the backward takes its mask from it).
    for w in sorted(set(widths[:L])):
        c("%%dense_%d (x: f32[%d,%d], w: f32[%d,%d], b: f32[%d]) -> f32[%d,%d] {" % (w, B, w, w, H, H, B, H))
        c("  %%x = f32[%d,%d] parameter(0)\n  %%w = f32[%d,%d] parameter(1)\n  %%b = f32[%d] parameter(2)" % (B, w, w, H, H))
        c("  %%h = f32[%d,%d] dot(%%x, %%w), lhs_contracting_dims={1}, rhs_contracting_dims={0}" % (B, H))
        c("  %%bb = f32[%d,%d] broadcast(%%b), dimensions={1}\n  %%z = f32[%d,%d] add(%%h, %%bb)" % (B, H, B, H))
        c("  %zero = f32[] constant(0)")
        c("  %%zb = f32[%d,%d] broadcast(%%zero), dimensions={}\n  ROOT %%a = f32[%d,%d] maximum(%%z, %%zb)\n}\n" % (B, H, B, H))
    c("%%logits (x: f32[%d,%d], w: f32[%d,%d], b: f32[%d]) -> f32[%d,%d] {" % (B, H, H, C, C, B, C))
    c("  %%x = f32[%d,%d] parameter(0)\n  %%w = f32[%d,%d] parameter(1)\n  %%b = f32[%d] parameter(2)" % (B, H, H, C, C))
    c("  %%h = f32[%d,%d] dot(%%x, %%w), lhs_contracting_dims={1}, rhs_contracting_dims={0}" % (B, C))
    c("  %%bb = f32[%d,%d] broadcast(%%b), dimensions={1}\n  ROOT %%y = f32[%d,%d] add(%%h, %%bb)\n}\n" % (B, C, B, C))
    # The loss (mean over the batch) and its gradient (softmax - onehot) / batch, in one kernel.
    c("%%loss (l: f32[%d,%d], y: s32[%d]) -> (f32[], f32[%d,%d]) {" % (B, C, B, B, C))
    c("  %%l = f32[%d,%d] parameter(0)\n  %%y = s32[%d] parameter(1)\n  %%zero = f32[] constant(0)" % (B, C, B))
    c("  %ninf = f32[] constant(-inf)")
    c("  %%m = f32[%d] reduce(%%l, %%ninf), dimensions={1}, to_apply=%%max" % B)
    c("  %%mb = f32[%d,%d] broadcast(%%m), dimensions={0}\n  %%sh = f32[%d,%d] subtract(%%l, %%mb)" % (B, C, B, C))
    c("  %%e = f32[%d,%d] exponential(%%sh)" % (B, C))
    c("  %%s = f32[%d] reduce(%%e, %%zero), dimensions={1}, to_apply=%%add\n  %%ls = f32[%d] log(%%s)" % (B, B))
    c("  %%iota = s32[%d,%d] iota(), iota_dimension=1\n  %%yb = s32[%d,%d] broadcast(%%y), dimensions={0}" % (B, C, B, C))
    c("  %%oh = pred[%d,%d] compare(%%yb, %%iota), direction=EQ\n  %%ohf = f32[%d,%d] convert(%%oh)" % (B, C, B, C))
    c("  %%t = f32[%d,%d] multiply(%%sh, %%ohf)" % (B, C))
    c("  %%tl = f32[%d] reduce(%%t, %%zero), dimensions={1}, to_apply=%%add\n  %%nll = f32[%d] subtract(%%ls, %%tl)" % (B, B))
    c("  %nsum = f32[] reduce(%nll, %zero), dimensions={0}, to_apply=%add")
    c("  %%invb = f32[] constant(%r)\n  %%loss = f32[] multiply(%%nsum, %%invb)" % (1.0 / B))
    c("  %%sb = f32[%d,%d] broadcast(%%s), dimensions={0}\n  %%p = f32[%d,%d] divide(%%e, %%sb)" % (B, C, B, C))
    c("  %%d = f32[%d,%d] subtract(%%p, %%ohf)\n  %%ib = f32[%d,%d] broadcast(%%invb), dimensions={}" % (B, C, B, C))
    c("  %%g = f32[%d,%d] multiply(%%d, %%ib)\n  ROOT %%r = (f32[], f32[%d,%d]) tuple(%%loss, %%g)\n}\n" % (B, C, B, C))
    # A bias gradient: the column sums of the gradient of its layer's output.
    for n in sorted({C, H}):
        c("%%colsum_%d (d: f32[%d,%d]) -> f32[%d] {\n  %%d = f32[%d,%d] parameter(0)\n  %%zero = f32[] constant(0)" % (n, B, n, n, B, n))
        c("  ROOT %%s = f32[%d] reduce(%%d, %%zero), dimensions={0}, to_apply=%%add\n}\n" % n)
    # An input gradient with the gradient of the ReLU before it as its epilogue, its mask from the ReLU's output.
    for n in sorted({C, H}):
        c("%%dgrad_relu_%d (dy: f32[%d,%d], w: f32[%d,%d], a: f32[%d,%d]) -> f32[%d,%d] {" % (n, B, n, H, n, B, H, B, H))
        c("  %%dy = f32[%d,%d] parameter(0)\n  %%w = f32[%d,%d] parameter(1)\n  %%a = f32[%d,%d] parameter(2)" % (B, n, H, n, B, H))
        c("  %%da = f32[%d,%d] dot(%%dy, %%w), lhs_contracting_dims={1}, rhs_contracting_dims={1}" % (B, H))
        c("  %%zero = f32[] constant(0)\n  %%zb = f32[%d,%d] broadcast(%%zero), dimensions={}" % (B, H))
        c("  %%pos = pred[%d,%d] compare(%%a, %%zb), direction=GT\n  ROOT %%dz = f32[%d,%d] select(%%pos, %%da, %%zb)\n}\n" % (B, H, B, H))
    # The first layer's weight gradient and its update; the others' updates.
    c("%%first_update (x: f32[%d,%d], dz: f32[%d,%d], w: f32[%d,%d]) -> f32[%d,%d] {" % (B, I, B, H, I, H, I, H))
    c("  %%x = f32[%d,%d] parameter(0)\n  %%dz = f32[%d,%d] parameter(1)\n  %%w = f32[%d,%d] parameter(2)" % (B, I, B, H, I, H))
    c("  %%g = f32[%d,%d] dot(%%x, %%dz), lhs_contracting_dims={0}, rhs_contracting_dims={0}" % (I, H))
    c("  %%lr = f32[] constant(%r)\n  %%lrb = f32[%d,%d] broadcast(%%lr), dimensions={}" % (a.lr, I, H))
    c("  %%s = f32[%d,%d] multiply(%%g, %%lrb)\n  ROOT %%n = f32[%d,%d] subtract(%%w, %%s)\n}\n" % (I, H, I, H))
    shapes = set()
    params = []
    for l in range(L):
        params += [("w%d" % l, [widths[l], H]), ("b%d" % l, [H])]
    params += [("wo", [H, C]), ("bo", [C])]
    for _, sh in params:
        shapes.add(tuple(sh))
    for sh in sorted(shapes):
        t = "f32[%s]" % ",".join(map(str, sh))
        nm = "_".join(map(str, sh))
        c("%%sgd_%s (w: %s, g: %s) -> %s {\n  %%w = %s parameter(0)\n  %%g = %s parameter(1)" % (nm, t, t, t, t, t))
        c("  %%lr = f32[] constant(%r)\n  %%lrb = %s broadcast(%%lr), dimensions={}" % (a.lr, t))
        c("  %%s = %s multiply(%%g, %%lrb)\n  ROOT %%n = %s subtract(%%w, %%s)\n}\n" % (t, t))
    n = len(params)
    ty = lambda sh: "f32[%s]" % ",".join(map(str, sh))
    alias = ", ".join("{%d}: (%d, {}, may-alias)" % (i, i) for i in range(n))
    sig = ", ".join("%s: %s" % (p, ty(s)) for p, s in params) + ", x: f32[%d,%d], labels: s32[%d]" % (B, I, B)
    res = ", ".join(ty(s) for _, s in params) + ", f32[]"
    e("ENTRY %%main (%s) -> (%s) {" % (sig, res))
    for i, (p, s) in enumerate(params):
        e("  %%%s = %s parameter(%d)" % (p, ty(s), i))
    e("  %%x = f32[%d,%d] parameter(%d)\n  %%labels = s32[%d] parameter(%d)" % (B, I, n, B, n + 1))
    act = "x"
    for l in range(L):
        e("  %%a%d = f32[%d,%d] fusion(%%%s, %%w%d, %%b%d), kind=kOutput, calls=%%dense_%d" % (l, B, H, act, l, l, widths[l]))
        act = "a%d" % l
    e("  %%out = f32[%d,%d] fusion(%%%s, %%wo, %%bo), kind=kOutput, calls=%%logits" % (B, C, act))
    e("  %%ce = (f32[], f32[%d,%d]) fusion(%%out, %%labels), kind=kInput, calls=%%loss" % (B, C))
    e("  %%lossv = f32[] get-tuple-element(%%ce), index=0\n  %%dlogits = f32[%d,%d] get-tuple-element(%%ce), index=1" % (B, C))
    new = {}

    def update(p):
        s = dict(params)[p]
        if p == "w0":
            e("  %%w0.new = f32[%d,%d] fusion(%%x, %%dz0, %%w0), kind=kOutput, calls=%%first_update" % (I, H))
        else:
            e("  %%%s.new = %s fusion(%%%s, %%%s), kind=kLoop, calls=%%sgd_%s" % (p, ty(s), p, grads[p], "_".join(map(str, s))))
        new[p] = p + ".new"

    # The backward pass and the updates in the order podsim issues its kernels: each layer's bias gradient, its input
    # gradient with the ReLU's gradient below it, the update of the layer above, its weight gradient and its bias update.
    top = L - 1
    e("  %%gbo = f32[%d] fusion(%%dlogits), kind=kInput, calls=%%colsum_%d" % (C, C))
    e("  %%dz%d = f32[%d,%d] fusion(%%dlogits, %%wo, %%a%d), kind=kOutput, calls=%%dgrad_relu_%d" % (top, B, H, top, C))
    grads = {"wo": "gwo", "bo": "gbo"}
    update("bo")
    e("  %%gwo = f32[%d,%d] dot(%%a%d, %%dlogits), lhs_contracting_dims={0}, rhs_contracting_dims={0}" % (H, C, top))
    above = lambda l: "wo" if l == top else "w%d" % (l + 1)
    for l in reversed(range(L)):
        e("  %%gb%d = f32[%d] fusion(%%dz%d), kind=kInput, calls=%%colsum_%d" % (l, H, l, H))
        grads["b%d" % l] = "gb%d" % l
        if l > 0:
            e("  %%dz%d = f32[%d,%d] fusion(%%dz%d, %%w%d, %%a%d), kind=kOutput, calls=%%dgrad_relu_%d" % (l - 1, B, H, l, l, l - 1, H))
            update(above(l))
            e("  %%gw%d = f32[%d,%d] dot(%%a%d, %%dz%d), lhs_contracting_dims={0}, rhs_contracting_dims={0}" % (l, H, H, l - 1, l))
            grads["w%d" % l] = "gw%d" % l
            update("b%d" % l)
        else:
            update("w0")
            update(above(0))
            update("b0")
    e("  ROOT %%o = (%s) tuple(%s, %%lossv)" % (res, ", ".join("%" + new[p] for p, _ in params)))
    e("}")
    print("HloModule jit_train_step, input_output_alias={ %s }\n" % alias)
    print("\n".join(comps))
    print("\n".join(entry))


if __name__ == "__main__":
    main()
