"""otbench: measure overthinking in reasoning models (see README.md)."""

__version__ = "0.1.0"
