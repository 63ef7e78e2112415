"""Derived tables stored beside a trace in a dataset, and computing them for a committed trace."""
