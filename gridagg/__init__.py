"""gridagg: exact n-dimensional range aggregates over sensor archives."""

__version__ = "0.1.0"
