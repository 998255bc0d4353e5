"""Tests of trlstack.commands, one file (or folder) a command."""
