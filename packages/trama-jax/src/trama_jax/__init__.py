"""trama-jax: trama documents as pure, jit-compiled JAX functions."""
