#!/usr/bin/python3
"""One SGD training step of the corpus MLP graphs, computed by PyTorch.

For each torch-neuronx MLP training-step module of the corpus
(../shared/corpus/torch-neuronx/mlp__*.hlo) this script builds the PyTorch
model the graph was traced from, makes seeded inputs, runs forward, loss,
backward and the SGD update, and writes, per module, into OUT/<module file>/:

  manifest.json   {"module": "<file>", "torch_version": ..., "seed": ..., "lr": ...,
                   "grad_scale": ..., "parameters": [{"number", "role", "type", "dims", "file"}],
                   "outputs": [{"index", "role", "type", "dims", "file"}]}
  param_<i>.bin   the value of entry parameter i of the HLO module
  output_<j>.bin  what output j of the module's root tuple must hold after the step

Binary files are raw little-endian, row-major; "f32" is float32, "s64" int64.

The mapping of HLO parameters and outputs to the model was read off the HLO
text (shapes, ops, and the metadata op_type / source_file of each parameter):

  - p0 (f32[], metadata source_file .../torch/optim/sgd.py line 263) is the
    `alpha` of `param.add_(grad, alpha=-lr)`: every weight update is
    add(w, multiply(grad, broadcast(p0))). So p0 = -lr.
  - weights and biases (source_file .../nn/modules/module.py, or the
    TransferWithStaticRing op in the data-parallel dumps) are told apart by
    shape: f32[out,in] weight and f32[out] bias of each nn.Linear; the shapes are
    all different.
  - the batch (source_file train.py / train_torchrun.py) is f32[B,784] or
    f32[B,1,28,28] (reshaped to [B,784] in the graph); labels are s64[B],
    compared with an iota over the 10 classes (one-hot) and with -100
    (nll_loss's ignore_index).
  - the loss is nll_loss (aten__nll_loss, mean over the labels != -100). In
    mini_mlp_* it is applied to the Linear's output directly (there is no
    exp/log in the graph); in the 3-layer graphs to log_softmax(fc3(...)) (the
    reduce-max / exp / reduce-sum / log sequence before it).
  - the 3-layer model is Linear(784,120) -> ReLU -> Linear(120,84) -> ReLU ->
    Linear(84,10) (the maximum(x, 0) after the first two dots; the backward
    selects on compare(activation, 0) GT).
  - outputs: the updated parameters (aliased in place to their inputs by
    input_output_alias), then tensors the training script kept alive: the
    flattened batch, the labels (single-device graphs), the model output
    (logits, or log_softmax), the loss, and in some dumps the gradients
    (p.grad, custom-calls AwsNeuronTransferWithStaticRing of the weight-grad
    dots), in the order of the root tuple.
  - data-parallel dumps (mini_mlp_dp, dp_mlp_1): rank 0 of a 2-replica job.
    The gradients go through all-reduce (replica_groups={}: all replicas) and
    are multiplied by 0.5 = 1/world size (xm.optimizer_step's gradient
    averaging); p1 (f32[], source_file .../torch_xla/core/xla_model.py) is the
    all-reduce ordering token, reduced along but not used by any output. Run in
    one process (one replica), all-reduce sums over that replica alone, so the
    step equals PyTorch's SGD step on the local gradients scaled by 0.5.

Not training steps: mlp__test.hlo is a 1-instruction fragment (a
get-tuple-element of an undefined all-reduce), not a module; it is not compared.

usage: mlp_step.py --out DIR [--seed N] [--lr X] [--module FILE ...]
       mlp_step.py --list        (prints the module files this script knows)
"""

import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

LENET = [("fc1", 784, 120), ("fc2", 120, 84), ("fc3", 84, 10)]
LINEAR = [("fc", 784, 10)]

# module file -> how its graph maps onto the model. "parameters" is indexed by
# HLO parameter number; "outputs" by the position in the root tuple.
SPECS = {
    "mlp__mini_mlp_single.hlo": {
        "layers": LINEAR, "log_softmax": False, "input_dims": [32, 784], "grad_scale": 1.0,
        "parameters": ["neg_lr", "labels", "fc.bias", "fc.weight", "input"],
        "outputs": ["new:fc.weight", "new:fc.bias", "input_flat", "labels", "model_output", "loss",
                    "grad:fc.bias", "grad:fc.weight"],
    },
    "mlp__mlp_single_final.hlo": {
        "layers": LENET, "log_softmax": True, "input_dims": [32, 784], "grad_scale": 1.0,
        "parameters": ["neg_lr", "fc1.bias", "fc1.weight", "input", "fc2.weight", "fc2.bias", "fc3.weight",
                       "fc3.bias", "labels"],
        "outputs": ["new:fc1.weight", "new:fc1.bias", "new:fc2.weight", "new:fc2.bias", "new:fc3.weight",
                    "new:fc3.bias", "input_flat", "labels", "model_output", "loss"],
    },
    "mlp__single_mlp.hlo": {
        "layers": LENET, "log_softmax": True, "input_dims": [32, 784], "grad_scale": 1.0,
        "parameters": ["neg_lr", "fc1.bias", "fc1.weight", "input", "fc2.weight", "fc2.bias", "fc3.weight",
                       "fc3.bias", "labels"],
        "outputs": ["new:fc1.weight", "new:fc1.bias", "new:fc2.weight", "new:fc2.bias", "new:fc3.weight",
                    "new:fc3.bias", "input_flat", "labels", "model_output", "loss",
                    "grad:fc3.bias", "grad:fc3.weight", "grad:fc2.bias", "grad:fc2.weight", "grad:fc1.bias",
                    "grad:fc1.weight"],
    },
    "mlp__mini_mlp_dp.hlo": {
        "layers": LINEAR, "log_softmax": False, "input_dims": [16, 1, 28, 28], "grad_scale": 0.5,
        "parameters": ["neg_lr", "allreduce_token", "labels", "fc.bias", "fc.weight", "input"],
        "outputs": ["new:fc.weight", "new:fc.bias", "input_flat", "model_output", "loss",
                    "grad:fc.bias", "grad:fc.weight"],
    },
    "mlp__dp_mlp_1.hlo": {
        "layers": LENET, "log_softmax": True, "input_dims": [16, 1, 28, 28], "grad_scale": 0.5,
        "parameters": ["neg_lr", "allreduce_token", "fc1.bias", "fc1.weight", "input", "fc2.weight", "fc2.bias",
                       "fc3.weight", "fc3.bias", "labels"],
        "outputs": ["new:fc1.weight", "new:fc1.bias", "new:fc2.weight", "new:fc2.bias", "new:fc3.weight",
                    "new:fc3.bias", "input_flat", "model_output", "loss",
                    "grad:fc3.bias", "grad:fc3.weight", "grad:fc2.bias", "grad:fc2.weight", "grad:fc1.bias",
                    "grad:fc1.weight"],
    },
}

NOT_TRAINING = {
    "mlp__test.hlo": "a 1-instruction fragment (get-tuple-element of an undefined all-reduce), not a module",
}


class Mlp(torch.nn.Module):
    def __init__(self, layers, log_softmax):
        super().__init__()
        self.names = [name for name, _, _ in layers]
        for name, fan_in, fan_out in layers:
            setattr(self, name, torch.nn.Linear(fan_in, fan_out))
        self.log_softmax = log_softmax

    def forward(self, x):
        for i, name in enumerate(self.names):
            x = getattr(self, name)(x)
            if i + 1 < len(self.names):
                x = F.relu(x)
        return F.log_softmax(x, dim=1) if self.log_softmax else x


def type_name(t):
    return {torch.float32: "f32", torch.int64: "s64"}[t.dtype]


def write(path, t):
    t = t.detach().contiguous()
    with open(path, "wb") as f:
        f.write(t.numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes())


def one_step(file, spec, seed, lr, out_dir):
    torch.manual_seed(seed)
    model = Mlp(spec["layers"], spec["log_softmax"])  # nn.Linear's default (Kaiming-uniform) init, seeded
    batch = spec["input_dims"][0]
    x = torch.rand(spec["input_dims"])                 # pixel-like values in [0, 1)
    labels = torch.randint(0, 10, (batch,), dtype=torch.int64)
    params = dict(model.named_parameters())
    before = {name: p.detach().clone() for name, p in params.items()}

    values = {"neg_lr": torch.tensor(-lr, dtype=torch.float32),
              "allreduce_token": torch.tensor(0.0, dtype=torch.float32),
              "labels": labels, "input": x}
    values.update(before)

    # The training step: forward, nll_loss, backward, gradient averaging (dp),
    # SGD update.
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    opt.zero_grad()
    out = model(x.reshape(batch, 784))
    loss = F.nll_loss(out, labels)
    loss.backward()
    for p in model.parameters():
        p.grad.mul_(spec["grad_scale"])
    opt.step()

    results = {"input_flat": x.reshape(batch, 784), "labels": labels, "model_output": out, "loss": loss}
    for name, p in params.items():
        results["new:" + name] = p.detach()
        results["grad:" + name] = p.grad.detach()

    os.makedirs(out_dir, exist_ok=True)
    manifest = {"module": file, "torch_version": torch.__version__, "seed": seed, "lr": lr,
                "grad_scale": spec["grad_scale"], "parameters": [], "outputs": []}
    for i, role in enumerate(spec["parameters"]):
        t = values[role]
        name = "param_%d.bin" % i
        write(os.path.join(out_dir, name), t)
        manifest["parameters"].append({"number": i, "role": role, "type": type_name(t), "dims": list(t.shape),
                                       "file": name})
    for j, role in enumerate(spec["outputs"]):
        t = results[role]
        name = "output_%d.bin" % j
        write(os.path.join(out_dir, name), t)
        manifest["outputs"].append({"index": j, "role": role, "type": type_name(t), "dims": list(t.shape),
                                    "file": name})
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="output directory (one subdirectory per module)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--module", action="append", help="module file name (default: all known)")
    ap.add_argument("--list", action="store_true", help="print the known module files and exit")
    args = ap.parse_args()
    if args.list:
        print(json.dumps({"training_steps": sorted(SPECS), "not_training_steps": NOT_TRAINING}, indent=2))
        return 0
    if not args.out:
        ap.error("--out is required")
    torch.set_num_threads(1)  # deterministic reductions
    for file in args.module or sorted(SPECS):
        if file not in SPECS:
            print("mlp_step.py: no mapping for %s%s" % (file, (": " + NOT_TRAINING[file]) if file in NOT_TRAINING
                                                       else ""), file=sys.stderr)
            return 2
        one_step(file, SPECS[file], args.seed, args.lr, os.path.join(args.out, file))
    return 0


if __name__ == "__main__":
    sys.exit(main())
