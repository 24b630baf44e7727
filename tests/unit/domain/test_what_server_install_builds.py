"""What `nodeau server install` builds from its options and the cards here, or why not."""

from __future__ import annotations

import pytest

from nodeau.domain.model_server import BuildAsk, InstallChoice, install_choice

H200 = {"GPU-a": "90", "GPU-b": "90"}
MIXED = {"GPU-a": "86", "GPU-b": "90", "GPU-c": "89"}


@pytest.mark.parametrize(
    ("cpu", "cuda", "archs", "cards", "flavour"),
    [
        (False, False, None, {}, "cpu"),
        (True, False, None, H200, "cpu"),
        (False, False, None, H200, "cuda-90"),
        (False, True, None, MIXED, "cuda-86-89-90"),
        (False, False, "90,80", {}, "cuda-80-90"),
        (False, True, " 120a , 90,90", {}, "cuda-90-120a"),
        (False, False, "80", H200, "cuda-80"),  # the named list wins over the cards
    ],
)
def test_the_build_chosen(
    cpu: bool, cuda: bool, archs: str | None, cards: dict[str, str], flavour: str
) -> None:
    choice = install_choice(cpu=cpu, cuda=cuda, archs=archs, cards=cards)
    assert isinstance(choice, InstallChoice)
    assert choice.ask.flavour == flavour


def test_each_choice_says_why() -> None:
    assert install_choice(cpu=False, cuda=False, archs=None, cards=H200) == InstallChoice(
        ask=BuildAsk(backend="cuda", cuda_archs=("90",)),
        why="CUDA for compute capability 90 (read from this machine's 2 NVIDIA card(s) by NVML)",
    )
    plain = install_choice(cpu=False, cuda=False, archs=None, cards={})
    assert isinstance(plain, InstallChoice)
    assert plain.why.startswith("the CPU (no NVIDIA card found here")


@pytest.mark.parametrize(
    ("cpu", "cuda", "archs", "cards", "words"),
    [
        (True, True, None, {}, "--cpu builds for the CPU alone"),
        (True, False, "90", {}, "--cpu builds for the CPU alone"),
        (False, True, None, {}, "--cuda: no NVIDIA card here"),
        (False, False, "sm_90", {}, "--cuda-arch 'sm_90': name compute capabilities"),
        (False, False, ",", {}, "--cuda-arch ',': name compute capabilities"),
    ],
)
def test_options_that_cannot_be_met_are_one_sentence(
    cpu: bool, cuda: bool, archs: str | None, cards: dict[str, str], words: str
) -> None:
    choice = install_choice(cpu=cpu, cuda=cuda, archs=archs, cards=cards)
    assert isinstance(choice, str)
    assert choice.startswith(words) and "\n" not in choice


def test_a_build_ask_is_consistent() -> None:
    with pytest.raises(ValueError, match="architectures"):
        BuildAsk(backend="cuda")
    with pytest.raises(ValueError, match="architectures"):
        BuildAsk(backend="cpu", cuda_archs=("90",))
    with pytest.raises(ValueError, match="cpu or cuda"):
        BuildAsk(backend="rocm")


@pytest.mark.parametrize(
    ("cpu", "cuda", "archs", "cards", "choice"),
    [
        (
            True,
            False,
            None,
            H200,
            InstallChoice(ask=BuildAsk(backend="cpu"), why="the CPU (asked with --cpu)"),
        ),
        (
            False,
            False,
            "90,80",
            {},
            InstallChoice(
                ask=BuildAsk(backend="cuda", cuda_archs=("80", "90")),
                why="CUDA for compute capability 80, 90 (asked with --cuda-arch)",
            ),
        ),
        (
            False,
            True,
            None,
            {"GPU-a": "100", "GPU-b": "90"},
            InstallChoice(
                ask=BuildAsk(backend="cuda", cuda_archs=("90", "100")),
                why="CUDA for compute capability 90, 100 (asked with --cuda; read from this "
                "machine's 2 NVIDIA card(s) by NVML)",
            ),
        ),
    ],
    ids=["cpu", "named architectures", "cards here, in number order"],
)
def test_each_choice_says_why_in_full(
    cpu: bool, cuda: bool, archs: str | None, cards: dict[str, str], choice: InstallChoice
) -> None:
    assert install_choice(cpu=cpu, cuda=cuda, archs=archs, cards=cards) == choice


@pytest.mark.parametrize(
    ("cuda", "archs", "sentence"),
    [
        (
            False,
            "sm_90",
            "--cuda-arch 'sm_90': name compute capabilities as CMake does, comma separated "
            "(80 for A100, 86 for RTX 30, 89 for RTX 40 and L4, 90 for H100/H200)",
        ),
        (
            True,
            None,
            "--cuda: no NVIDIA card here to read a compute capability from; name the "
            "architectures with --cuda-arch (e.g. --cuda-arch 90 for H100/H200)",
        ),
    ],
)
def test_options_that_cannot_be_met_say_what_to_do_instead(
    cuda: bool, archs: str | None, sentence: str
) -> None:
    assert install_choice(cpu=False, cuda=cuda, archs=archs, cards={}) == sentence


def test_a_build_ask_says_what_is_inconsistent() -> None:
    with pytest.raises(ValueError) as raised:
        BuildAsk(backend="cuda")
    assert str(raised.value) == "a CUDA build names its architectures, a CPU build none"
