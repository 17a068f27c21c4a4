"""A small JAX training script, written as any JAX user would (it knows nothing of npc).

An MLP classifier on synthetic data: jax.jit'ed training step (jax.grad and an
SGD-with-momentum update) and evaluation step. Prints one line per step,
`step <n> loss <loss>`, then `eval loss <loss> accuracy <acc>` and
`first_step_seconds <s>` (wall time from start to the end of the first step).
"""
import argparse
import time

START = time.perf_counter()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


def init_params(key, sizes):
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        key, sub = jax.random.split(key)
        params.append((jax.random.normal(sub, (fan_in, fan_out), jnp.float32) / np.sqrt(fan_in),
                       jnp.zeros((fan_out,), jnp.float32)))
    return params


def forward(params, x):
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def loss_fn(params, x, y):
    logits = forward(params, x)
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(y, logits.shape[-1]), axis=-1))


@jax.jit
def train_step(params, velocity, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    velocity = jax.tree_util.tree_map(lambda v, g: 0.9 * v + g, velocity, grads)
    params = jax.tree_util.tree_map(lambda p, v: p - 0.05 * v, params, velocity)
    return params, velocity, loss


@jax.jit
def eval_step(params, x, y):
    logits = forward(params, x)
    return loss_fn(params, x, y), jnp.mean(jnp.argmax(logits, -1) == y)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    features, classes = 16, 4
    centers = rng.normal(size=(classes, features)).astype(np.float32) * 2
    labels = rng.integers(0, classes, size=(args.batch * 8,))
    data = centers[labels] + rng.normal(size=(labels.size, features)).astype(np.float32)

    params = init_params(jax.random.PRNGKey(0), [features, args.width, args.width, classes])
    velocity = jax.tree_util.tree_map(jnp.zeros_like, params)
    for step in range(args.steps):
        lo = (step % 8) * args.batch
        x, y = jnp.asarray(data[lo:lo + args.batch]), jnp.asarray(labels[lo:lo + args.batch])
        params, velocity, loss = train_step(params, velocity, x, y)
        print(f"step {step} loss {float(loss):.6f}", flush=True)
        if step == 0:
            print(f"first_step_seconds {time.perf_counter() - START:.3f}", flush=True)
    loss, acc = eval_step(params, jnp.asarray(data), jnp.asarray(labels))
    print(f"eval loss {float(loss):.6f} accuracy {float(acc):.4f}", flush=True)


if __name__ == "__main__":
    main()
