"""What a run tells the world: observers, Prometheus metrics, OTLP traces, Sentry check-ins, the CI summary, the HTML report, and the words every sentence about a run is built from."""
