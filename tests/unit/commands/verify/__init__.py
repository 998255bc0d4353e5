"""Tests of trlstack verify, one file a module; built_image.py makes the image trees they check."""
