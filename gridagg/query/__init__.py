"""Queries: what a question asks (spec: boxes, polygons, series, limits, answers), the
planner that answers it from the tree and one store scan (planner over walk), polygon
regions (regions), bounds of answers within a deadline (bounds), the day, position and
month rollups (rollups) and the sample of questions the tuner prices (questions)."""
