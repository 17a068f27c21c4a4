"""Per-execution time of a small jitted function on the current JAX platform.

Prints `exec_us_per_call <microseconds>` (median of 5 rounds of --calls calls,
each waited for). Run once with JAX_PLATFORMS naming libnpc_pjrt.so and once
naming the inner plugin registered directly: the difference is the plugin's
overhead per execution.
"""
import argparse
import statistics
import time

import jax
import jax.numpy as jnp


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    f = jax.jit(lambda x, w: jnp.tanh(x @ w))
    x = jnp.ones((8, 32), jnp.float32)
    w = jnp.ones((32, 32), jnp.float32) * 0.01
    f(x, w).block_until_ready()
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(args.calls):
            f(x, w).block_until_ready()
        rounds.append((time.perf_counter() - start) / args.calls * 1e6)
    print(f"exec_us_per_call {statistics.median(rounds):.2f}", flush=True)


if __name__ == "__main__":
    main()
