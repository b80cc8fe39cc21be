"""The trainer-facing half of palaestra: trajectories, streams, curricula, advantages."""
