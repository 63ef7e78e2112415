"""The JSON contract of an analysis result: its types and its rows."""
