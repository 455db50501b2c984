import pytest
from cryptography.fernet import Fernet
from django.core.management import CommandError, call_command

from prbench import crypto
from providers.models import ProviderCredential

KEY = "sk-rotate-me-1234567890"


@pytest.fixture
def keys(settings):
    def use(*fernet_keys):
        settings.PRBENCH_ENCRYPTION_KEYS = ",".join(fernet_keys)
        crypto.reset_cache()

    yield use
    crypto.reset_cache()


def test_keys_rotate_without_losing_a_credential(org, keys):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    keys(old)
    credential = ProviderCredential(org=org, provider="openai")
    credential.set_api_key(KEY)
    credential.save()
    before = credential.api_key_encrypted
    keys(new, old)  # the new key goes in front; the old one still decrypts
    assert ProviderCredential.objects.get().api_key() == KEY
    call_command("rotate_credentials")
    rotated = ProviderCredential.objects.get()
    assert rotated.api_key_encrypted != before
    keys(new)  # the old key can now be dropped
    assert ProviderCredential.objects.get().api_key() == KEY


def test_an_unreadable_credential_stops_the_rotation_and_changes_nothing(org, keys):
    keys(Fernet.generate_key().decode())
    credential = ProviderCredential(org=org, provider="openai")
    credential.set_api_key(KEY)
    credential.save()
    keys(Fernet.generate_key().decode())
    with pytest.raises(CommandError, match="cannot be decrypted with any configured key; nothing was changed"):
        call_command("rotate_credentials")
    assert ProviderCredential.objects.get().api_key_encrypted == credential.api_key_encrypted


def test_a_bad_key_is_a_configuration_error(keys):
    keys("not-a-fernet-key")
    with pytest.raises(Exception, match="not a Fernet key"):
        crypto.encrypt("x")
