"""The JAX front end (imports JAX lazily)."""
