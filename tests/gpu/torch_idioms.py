#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""PyTorch idioms that synchronize without saying so, each with the fix a user would make.

Every step runs the same small model on the GPU (--width, --depth, --batch set its GPU time;
--host-us adds host work of a controlled length, as a data pipeline or logging would) and then
the idiom. The plain line waits for the GPU; --fixed keeps the work on the GPU and the result
is the same (RESULT, printed to 6 digits, equal in both modes).

    mask        x = out[out > 0]; total += x.sum()       boolean-mask indexing: the result's
                size is computed on the GPU and copied back (nonzero inside libtorch).
                Fix: total += torch.where(out > 0, out, 0).sum()
    nonzero     count += len((out > 0).nonzero())          nonzero's size comes back to the host.
                Fix: count += (out > 0).sum() (kept on the GPU)
    item_if     if loss.item() > limit: scale *= 0.5     a Python branch on a GPU value.
                Fix: scale = scale * torch.where(loss > limit, 0.5, 1.0)
    tolist      lo, hi = stats.tolist(); clip at hi        several values read to the host.
                Fix: the same with torch.minimum on the GPU tensors
    if_tensor   if torch.isnan(loss).any(): skip the step    bool(tensor) waits.
                Fix: loss = torch.nan_to_num(loss) (the step is never skipped: no NaN here)
    timer       torch.cuda.synchronize() around each step to time it.
                Fix: CUDA events recorded around each step, read once at the end
    unpinned    xb = host_batch.to(dev, non_blocking=True) from an unpinned host tensor: the
                copy is synchronous. Fix: the host batch in pinned memory (pin_memory())

Prints (the protocol of tests/gpu/torch_item.py):
    RESULT <the idiom's final value, 6 significant digits>
    WALL_S <seconds from before CUDA's first use to the end>
    LOOP_S <seconds of the timed steps>
The warm-up steps (--warmup) run the model without the idiom, so a profile of the program sees
the planted lines in the timed steps only.
--dry-run imports nothing from torch: it checks the arguments, prints each idiom's plain and
fixed lines (PLAN) and exits; the numbers of a run need a GPU.
"""
import argparse
import time

IDIOMS = ("mask", "nonzero", "item_if", "tolist", "if_tensor", "timer", "unpinned")


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--idiom", choices=IDIOMS, required=True)
    ap.add_argument("--fixed", action="store_true")
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--host-us", type=float, default=0.0,
                    help="host work each step (a data pipeline, logging), in microseconds")
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    if a.steps < 1 or a.warmup < 0 or a.width < 1 or a.depth < 1 or a.batch < 1 or a.host_us < 0:
        ap.error("steps, width, depth, batch > 0; warmup, host-us >= 0")
    return a


def host_work(us):
    end = time.monotonic() + us / 1e6
    while time.monotonic() < end:
        pass


def make_steps(torch, a, dev):
    """The idioms: each a function (state, out, loss) -> None, plain or fixed."""
    st = {"total": torch.zeros((), device=dev), "count": torch.zeros((), device=dev),
          "scale": torch.ones((), device=dev), "clip": torch.full((), 1e9, device=dev),
          "events": [], "host_s": 0.0}
    limit = 0.0

    def mask(out, loss):
        if a.fixed:
            st["total"] += torch.where(out > 0, out, 0).sum()
        else:
            st["total"] += out[out > 0].sum()  # FFM-PLANT: idiom mask

    def nonzero(out, loss):
        if a.fixed:
            st["count"] += (out > 0).sum()
        else:
            st["count"] += len((out > 0).nonzero())  # FFM-PLANT: idiom nonzero

    def item_if(out, loss):
        if a.fixed:
            st["scale"] = st["scale"] * torch.where(loss > limit, 0.5, 1.0)
        elif loss.item() > limit:  # FFM-PLANT: idiom item_if
            st["scale"] = st["scale"] * 0.5
        st["scale"] = st["scale"].clamp(min=1e-3)

    def tolist(out, loss):
        stats = torch.stack((out.min(), out.max()))
        if a.fixed:
            st["clip"] = torch.minimum(st["clip"], stats[1])
        else:
            lo, hi = stats.tolist()  # FFM-PLANT: idiom tolist
            st["clip"] = st["clip"].clamp(max=hi)

    def if_tensor(out, loss):
        if a.fixed:
            st["total"] += torch.nan_to_num(loss)
        elif not torch.isnan(loss).any():  # FFM-PLANT: idiom if_tensor
            st["total"] += loss

    return st, {"mask": mask, "nonzero": nonzero, "item_if": item_if, "tolist": tolist,
                "if_tensor": if_tensor}


def result(st, idiom):
    key = {"nonzero": "count", "item_if": "scale", "tolist": "clip"}.get(idiom, "total")
    return float(st[key])


def run(a):
    import torch

    t0 = time.monotonic()
    torch.manual_seed(0)
    dev = torch.device("cuda")
    layers = []
    for _ in range(a.depth):
        layers += [torch.nn.Linear(a.width, a.width), torch.nn.Tanh()]
    model = torch.nn.Sequential(*layers).to(dev)
    host_batch = torch.randn(a.batch, a.width)
    if a.idiom == "unpinned" and a.fixed:
        host_batch = host_batch.pin_memory()  # the fix: a pinned source
    x = host_batch.to(dev)
    st, idioms = make_steps(torch, a, dev)

    def step(idiom=True):
        xb = x
        if idiom and a.idiom == "unpinned":
            xb = host_batch.to(dev, non_blocking=True)  # FFM-PLANT: idiom unpinned
        with torch.no_grad():
            out = model(xb)
            loss = out.square().mean()
            if idiom and a.idiom in idioms:
                idioms[a.idiom](out, loss)
            else:
                st["total"] += loss
        host_work(a.host_us)

    def timed_step():
        if a.idiom != "timer":
            step()
        elif a.fixed:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            step()
            e.record()
            st["events"].append((s, e))
        else:
            torch.cuda.synchronize()  # FFM-PLANT: idiom timer
            s = time.monotonic()
            step()
            torch.cuda.synchronize()  # FFM-PLANT: idiom timer
            st["host_s"] += time.monotonic() - s

    for _ in range(a.warmup):  # the model's kernels and the allocator; not the idiom
        step(idiom=False)
    torch.cuda.synchronize()
    for k in ("total", "count"):
        st[k].zero_()
    st["scale"].fill_(1.0)
    st["clip"].fill_(1e9)
    t1 = time.monotonic()
    for _ in range(a.steps):
        timed_step()
    value = result(st, a.idiom)  # reads the result: waits for the last step
    if st["events"]:
        st["host_s"] = sum(s.elapsed_time(e) for s, e in st["events"]) / 1e3
    t2 = time.monotonic()
    print(f"RESULT {value:.6g}")
    if a.idiom == "timer":
        print(f"STEP_TIME_S {st['host_s']:.6f}")
    print(f"WALL_S {t2 - t0:.6f}")
    print(f"LOOP_S {t2 - t1:.6f}")


def dry_run(a):
    import inspect

    src = inspect.getsource(make_steps) + inspect.getsource(run)
    for line in src.splitlines():
        if "FFM-PLANT: idiom " + a.idiom in line:
            print("PLAN plain:", line.split("#")[0].strip())
    print(f"PLAN idiom={a.idiom} fixed={int(a.fixed)} steps={a.steps} width={a.width} "
          f"depth={a.depth} batch={a.batch} host-us={a.host_us:g}")


def main():
    a = parse()
    if a.dry_run:
        dry_run(a)
    else:
        run(a)


if __name__ == "__main__":
    main()
