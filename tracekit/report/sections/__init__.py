"""The report's renderer-neutral content: sections, blocks, headline, environment, why, serving, low coverage."""
