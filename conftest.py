"""Root conftest: keeps every run's side effects inside the test's own temp dirs."""
