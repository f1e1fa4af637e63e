#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A PyTorch training loop that logs its loss with loss.item() every step.

Every --time-every steps it also times the loop, with a torch.cuda.synchronize() before reading
the clock (as training scripts log their step time): a required sync of small benefit, kept as
it is by --fixed.

.item() copies the loss to the CPU and waits for the GPU: each step's CPU work (Python, launch
overhead) can no longer overlap the previous step's GPU work. --fixed accumulates the loss on
the GPU and reads it once at the end.

--read picks how the step hands its result to the CPU, the ways training scripts do it (each
a sync the CPU needs at once, so "required" by the paper's rules; their fix changes the use):
    item      last = loss.item()                       (logging)
    cpu       last = float(loss.detach().cpu())       (logging through a host tensor)
    tolist    loss and the output's mean, .tolist()   (logging several metrics)
    isfinite  if not torch.isfinite(loss): raise       (a NaN guard, bool(tensor))
Plain and fixed compute the same metric on the GPU every step; plain reads it at once, fixed
accumulates it there (the guard: ANDs it, checked at each timer sync). Prints CHECKSUM-free
but comparable output:
    LOSS <final loss, 6 digits>   (the same with and without --fixed)
    WALL_S <seconds of the training loop>
--torch-profile FILE also runs torch.profiler (CUPTI-based, the peer tool) and writes, per
operator/runtime call, the time it attributes (self CPU time) as JSON to FILE.

--ab BLOCK measures the fix's saving inside one process: after the warm-up, --steps steps in
blocks of BLOCK steps, plain and fixed alternating (ABBA: a pair's order flips every pair, so a
drift in the GPU's speed falls on both alike), each block timed from an idle GPU to an idle
GPU. Separate runs of the program differ by more than the fix saves (the GPU's clock and the
node's load move between them); a pair of blocks seconds apart does not. Prints, for the
plain and the fixed steps alike, PLAIN_S and FIXED_S (their summed block times) and
    AB_SAVED_PER_STEP <median over the pairs of (plain block - fixed block) / BLOCK, seconds>
and, per block, where its time went:
    AB_BLOCK <plain|fixed> <start, epoch s> <block s> <submitted s> <in the reads s>
"submitted" is the time until the block's last step had handed its work to the GPU (before
the block's closing read), "in the reads" the time spent inside the per-step .item() calls
(plain blocks of --read item; 0 otherwise).
A fixed block whose submitted time is close to its block time was paced by the CPU.
    AB_STEPS <plain|fixed> <each step's time, us>
(the last one includes the block's closing read).
"""
import argparse
import json
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixed", action="store_true")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=20,
                    help="steps run first, untimed: cuBLAS handles, allocator, kernels. A profile "
                         "covers them too: compare its estimate times steps / (steps + warmup)")
    ap.add_argument("--time-every", type=int, default=100)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--workers", type=int, default=0,
                    help="feed the batches through a DataLoader with this many worker processes")
    ap.add_argument("--read", choices=("item", "cpu", "tolist", "isfinite"), default="item",
                    help="how each step hands its result to the CPU")
    ap.add_argument("--torch-profile", metavar="FILE")
    ap.add_argument("--ab", type=int, default=0, metavar="BLOCK",
                    help="alternate plain and fixed blocks of BLOCK steps in this process")
    a = ap.parse_args()

    torch.manual_seed(0)
    dev = torch.device("cuda")
    layers = []
    for _ in range(a.depth):
        layers += [torch.nn.Linear(a.width, a.width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(a.width, 1)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(a.batch, a.width, device=dev)
    y = torch.randn(a.batch, 1, device=dev)
    loader = None
    if a.workers:
        # Worker processes fork from a process whose CUDA is up; they only build CPU batches.
        data = torch.utils.data.TensorDataset(torch.randn(8 * a.batch, a.width),
                                              torch.randn(8 * a.batch, 1))
        loader = torch.utils.data.DataLoader(data, batch_size=a.batch, num_workers=a.workers,
                                             pin_memory=True, persistent_workers=True)

    def batches():
        while True:
            if loader is None:
                yield x, y
            else:
                for bx, by in loader:
                    yield bx.to(dev, non_blocking=True), by.to(dev, non_blocking=True)

    def metric(loss, out):
        if a.read == "tolist":
            return torch.stack((loss.detach(), out.detach().mean()))
        if a.read == "isfinite":
            return torch.isfinite(loss)
        return loss.detach()

    def train(steps, fixed=a.fixed):
        total = None
        last = 0.0
        reads = 0.0
        marks = []
        feed = batches()
        for step in range(steps):
            marks.append(time.monotonic())
            bx, by = next(feed)
            opt.zero_grad(set_to_none=True)
            out = model(bx)
            loss = torch.nn.functional.mse_loss(out, by)
            loss.backward()
            opt.step()
            m = metric(loss, out)
            if fixed:
                total = m if total is None else (total & m if a.read == "isfinite" else total + m)
            elif a.read == "item":
                r0 = time.monotonic()
                last = m.item()  # FFM-PLANT: torch per-step sync
                reads += time.monotonic() - r0
            elif a.read == "cpu":
                last = float(m.cpu())  # FFM-PLANT: torch per-step sync
            elif a.read == "tolist":
                last = m.tolist()[0]  # FFM-PLANT: torch per-step sync
            elif not m:  # FFM-PLANT: torch per-step sync
                raise FloatingPointError(f"loss is not finite at step {step}")
            if (step + 1) % max(a.time_every, 1) == 0:
                torch.cuda.synchronize()  # FFM-PLANT: torch timer sync
                if fixed and a.read == "isfinite" and not total:
                    raise FloatingPointError(f"loss is not finite before step {step}")
        submitted = time.monotonic()
        last = loss.item()
        torch.cuda.synchronize()
        marks.append(time.monotonic())
        return last, submitted, reads, marks

    def ab(block, steps):
        plain, fixed, saved = 0.0, 0.0, []
        for pair in range(max(steps // (2 * block), 1)):
            t = {}
            for f in ((False, True) if pair % 2 == 0 else (True, False)):
                e0, t0 = time.time(), time.monotonic()
                _, sub, reads, marks = train(block, f)
                t[f] = time.monotonic() - t0
                mode = "fixed" if f else "plain"
                print(f"AB_BLOCK {mode} {e0:.6f} {t[f]:.6f} {sub - t0:.6f} {reads:.6f}")
                print(f"AB_STEPS {mode}", " ".join("%.0f" % ((b - e) * 1e6) for e, b in zip(marks, marks[1:])))
            plain, fixed = plain + t[False], fixed + t[True]
            saved.append((t[False] - t[True]) / block)
        saved.sort()
        mid = len(saved) // 2
        print(f"PLAIN_S {plain:.6f}")
        print(f"FIXED_S {fixed:.6f}")
        print(f"AB_PAIRS {len(saved)}")
        print(f"AB_SAVED_PER_STEP {(saved[mid] + saved[~mid]) / 2:.9f}")

    train(max(a.warmup, 1))  # warm-up: cuBLAS handles, allocator, kernels
    a.steps = max(a.steps, 1)
    if a.ab:
        ab(a.ab, a.steps)
        return
    if a.torch_profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            t0 = time.monotonic()
            last = train(a.steps)[0]
            wall = time.monotonic() - t0
        rows = []
        for e in prof.key_averages():
            rows.append({"name": e.key, "calls": e.count,
                         "self_cpu_s": e.self_cpu_time_total / 1e6,
                         "cpu_total_s": e.cpu_time_total / 1e6})
        with open(a.torch_profile, "w") as f:
            json.dump({"tool": "torch.profiler", "wall_s": wall, "ops": rows}, f)
    else:
        t0 = time.monotonic()
        last = train(a.steps)[0]
        wall = time.monotonic() - t0
    print(f"LOSS {last:.6f}")
    print(f"WALL_S {wall:.6f}")


if __name__ == "__main__":
    main()
