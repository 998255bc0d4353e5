"""Tests of trlstack.plan, one file a module: the plan, its renderings, its check as .env holds it."""
