"""Leaderboard tables and plots built from the stage tables (pandas and matplotlib only)."""
