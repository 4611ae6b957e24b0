"""The hands-on commands' work: status, listing jobs, maintenance, the demo and its throwaway server."""
