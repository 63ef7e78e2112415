"""What each command shows: the analyze, summary, whatif and ranks screens, the label decisions."""
