"""Reading a Kineto JSON document: the window, the native and pure scanners, batches, events, columns and frames."""
