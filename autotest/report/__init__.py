"""Report: render the verdict (results.json, report.md, plots) and publish it (results folder, step summary)."""
