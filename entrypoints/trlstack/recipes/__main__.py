"""Regenerate keys.json from the installed TRL: `python -m trlstack.recipes`."""

from trlstack.recipes import KEYS_FILE, write_keys_file

write_keys_file()
print(f"wrote {KEYS_FILE}")
