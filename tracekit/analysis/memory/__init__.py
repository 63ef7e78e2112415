"""Device memory over the phases (issue 38): the memory events of the device the trace ran on, with
the op and region that allocated (events), the timeline per step and phase with the KV-cache check
and the headroom (timeline), and the KV figures it is checked against (kv)."""
