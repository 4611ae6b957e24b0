"""The hands-on commands' work: status and what in it needs attention, listing jobs, maintenance, the demo and its throwaway server."""
