"""Tests of trlstack.roles, one file a module."""
