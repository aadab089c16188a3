"""Inside the application: spans, the span processor, configure(), export, runtime budgets."""
