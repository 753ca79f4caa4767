package config

// validateTelemetry checks a Telemetry with Istio's rules. Its rules come with
// the feature that reads the kind; until then only the generic checks of
// every config (names, decoding) apply.
func validateTelemetry(c *Config) Errors {
	return nil
}
