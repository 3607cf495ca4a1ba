"""Thin Prefect tasks: each body calls one library function."""
