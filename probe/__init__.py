"""Probe stage: trajectories, segmentation and answer probes (heavy deps imported lazily)."""
