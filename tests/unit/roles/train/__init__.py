"""Tests of trlstack.roles.train, one file a module."""
