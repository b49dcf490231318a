"""A tiny training run for test_torch.py: fixed seeds, a batch per step made from the step
number, an async checkpoint every --save-every steps; with --resume it starts from the latest
complete checkpoint. Prints "loss STEP VALUE" per step and "saving STEP" after each async_save
call; writes the final parameters to --out. --pad-at S --pad-mib N adds N MiB to the state
saved at step S (a save that takes long enough to be killed in)."""
import argparse

import torch

import penstock
from penstock.torch import Checkpoint


def batch(step):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(64, 16, generator=g)
    return x, x[:, :4].sum(1, keepdim=True) - x[:, 4:8].sum(1, keepdim=True)


def main():
    a = argparse.ArgumentParser()
    for flag in ("--container", "--prefix", "--out"):
        a.add_argument(flag, required=True)
    a.add_argument("--steps", type=int, default=30)
    a.add_argument("--save-every", type=int, default=5)
    a.add_argument("--resume", action="store_true")
    a.add_argument("--pad-at", type=int, default=-1)
    a.add_argument("--pad-mib", type=int, default=0)
    args = a.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    ckpt = Checkpoint(penstock.Client(), args.container, args.prefix, keep_last=3)
    start = 0
    if args.resume:
        state = ckpt.load()
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["step"]
        print(f"resumed {start}", flush=True)
    for step in range(start, args.steps):
        x, y = batch(step)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"loss {step} {loss.item():.12e}", flush=True)
        if (step + 1) % args.save_every == 0:
            state = {"model": model.state_dict(), "opt": opt.state_dict(), "step": step + 1}
            if step + 1 == args.pad_at:
                state["pad"] = torch.ones(args.pad_mib << 18)
            ckpt.async_save(state, f"step-{step + 1:06d}")
            print(f"saving {step + 1}", flush=True)
    ckpt.wait()
    torch.save(model.state_dict(), args.out)


if __name__ == "__main__":
    main()
