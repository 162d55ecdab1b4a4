"""What many test modules stand on: the recording sleep and the provider-client harness."""
