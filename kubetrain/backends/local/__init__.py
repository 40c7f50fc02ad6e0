"""The local backend: a supervisor runs every replica as a process on this machine."""
