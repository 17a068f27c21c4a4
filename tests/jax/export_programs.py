"""Real JAX programs for tests/e2e/jax_programs_test.cc, exported with JAX's public lowering API.

    python export_programs.py <output dir>

For each program writes <name>.hlo_module.pb (the HloModuleProto of jax.jit(f).lower(*args)), the
fixed inputs and JAX's own outputs for them as raw little-endian arrays (<name>.in<i>.bin,
<name>.out<i>.bin), and manifest.json: {name: {"inputs": [{"dtype", "shape"}], "outputs": [...]}}.
Inputs and outputs are the flattened leaves of the arguments and of the result, in the order of the
entry computation's parameters and result tuple. Runs offline once jax is installed
(scripts/install-pjrt.sh --jax).
"""
import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np


def mlp_train_step(params, x, y):
    """One SGD step of a 2-layer MLP with softmax cross-entropy: new params and the loss."""
    def loss_fn(p):
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        logits = h @ p["w2"] + p["b2"]
        return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(logits), axis=-1))
    loss, grads = jax.value_and_grad(loss_fn)(params)
    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), loss


def transformer_block_grad(params, x):
    """Forward and backward of a pre-LN transformer block (single-head attention + MLP)."""
    def layer_norm(v, g, b):
        mean = jnp.mean(v, axis=-1, keepdims=True)
        var = jnp.mean((v - mean) ** 2, axis=-1, keepdims=True)
        return (v - mean) / jnp.sqrt(var + 1e-5) * g + b

    def block(p):
        h = layer_norm(x, p["ln1_g"], p["ln1_b"])
        q, k, v = h @ p["wq"], h @ p["wk"], h @ p["wv"]
        att = jax.nn.softmax(q @ jnp.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]), axis=-1)
        y = x + (att @ v) @ p["wo"]
        h2 = layer_norm(y, p["ln2_g"], p["ln2_b"])
        out = y + jax.nn.gelu(h2 @ p["w1"], approximate=True) @ p["w2"]
        return jnp.mean(out ** 2)
    return jax.value_and_grad(block)(params)


def convnet_grad(params, x, y):
    """Forward and backward of a small convolutional network (conv, relu, conv, mean pool, dense)."""
    def loss_fn(p):
        h = jax.lax.conv_general_dilated(x, p["c1"], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        h = jax.nn.relu(h)
        h = jax.lax.conv_general_dilated(h, p["c2"], (2, 2), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        logits = jnp.mean(jax.nn.relu(h), axis=(1, 2)) @ p["w"]
        return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(logits), axis=-1))
    return jax.value_and_grad(loss_fn)(params)


def programs(rng):
    f = lambda *shape: (rng.standard_normal(shape) * 0.5).astype(np.float32)
    onehot = lambda n, k: np.eye(k, dtype=np.float32)[rng.integers(0, k, n)]
    d = 16
    return {
        "mlp_train_step": (mlp_train_step,
                           ({"w1": f(8, 32), "b1": f(32), "w2": f(32, 4), "b2": f(4)}, f(16, 8), onehot(16, 4))),
        "transformer_block_grad": (transformer_block_grad,
                                   ({"ln1_g": 1 + f(d) * 0.1, "ln1_b": f(d) * 0.1, "wq": f(d, d), "wk": f(d, d),
                                     "wv": f(d, d), "wo": f(d, d), "ln2_g": 1 + f(d) * 0.1, "ln2_b": f(d) * 0.1,
                                     "w1": f(d, 4 * d), "w2": f(4 * d, d)}, f(2, 8, d))),
        "convnet_grad": (convnet_grad, ({"c1": f(3, 3, 1, 4), "c2": f(3, 3, 4, 8), "w": f(8, 3)},
                                        f(2, 8, 8, 1), onehot(2, 3))),
    }


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    manifest = {}
    for name, (fn, args) in programs(np.random.default_rng(7)).items():
        lowered = jax.jit(fn, keep_unused=True).lower(*args)
        with open(os.path.join(out_dir, name + ".hlo_module.pb"), "wb") as out:
            out.write(lowered.compiler_ir("hlo").as_serialized_hlo_module_proto())
        results = jax.tree_util.tree_leaves(jax.jit(fn)(*args))
        entry = {"inputs": [], "outputs": []}
        for kind, leaves in (("in", jax.tree_util.tree_leaves(args)), ("out", results)):
            for i, leaf in enumerate(leaves):
                a = np.asarray(leaf)
                with open(os.path.join(out_dir, f"{name}.{kind}{i}.bin"), "wb") as out:
                    out.write(a.astype(a.dtype.newbyteorder("<")).tobytes(order="C"))
                entry["inputs" if kind == "in" else "outputs"].append({"dtype": str(a.dtype), "shape": list(a.shape)})
        manifest[name] = entry
    with open(os.path.join(out_dir, "manifest.json"), "w") as out:
        json.dump(manifest, out, indent=1)
    print("jax", jax.__version__, "exported", ", ".join(manifest))


if __name__ == "__main__":
    main()
