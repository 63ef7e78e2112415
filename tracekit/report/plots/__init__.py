"""Plots: the canvas, each plot, and drawing every plot a report shows."""
