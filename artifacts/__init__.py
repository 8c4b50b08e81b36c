"""Frozen configurations, manifests and small reference outputs."""
