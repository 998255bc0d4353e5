"""Tests of trlstack.commands.doctor, one file a module: the judgements, the command."""
