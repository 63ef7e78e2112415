"""Serving figures from phase regions: latency (TTFT/TPOT/ITL), serving metrics, prefill–decode interference,
step costs for the what-if."""
