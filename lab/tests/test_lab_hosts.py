"""lab/lab.py's hosts: a host made for another lab key is made anew, one made for this key is started as it is."""

import subprocess

import lab


class FakeDocker:
    """Answers `docker container inspect` for one existing host with the key label it was made for."""

    def __init__(self, made_for):
        self.made_for = made_for
        self.calls = []

    def __call__(self, *args, **kwargs):
        self.calls.append(args)
        if args[:2] == ("container", "inspect"):
            if self.made_for is None:
                return subprocess.CompletedProcess(args, 1, "", "No such container")
            return subprocess.CompletedProcess(args, 0, self.made_for + "\n", "")
        return subprocess.CompletedProcess(args, 0, "", "")


def lab_key(tmp_path, material):
    key = tmp_path / "id_ed25519"
    key.write_text("private\n")
    key.with_suffix(".pub").write_text(f"ssh-ed25519 {material} specdec-lab-lab\n")
    return key


def test_a_host_made_for_this_key_is_started_as_it_is(tmp_path, monkeypatch):
    key = lab_key(tmp_path, "AAAAC3NzaC1lZDI1NTE5AAAAIthis")
    fake = FakeDocker(lab.key_id(key))
    monkeypatch.setattr(lab, "docker", fake)
    lab.start_host("lab", "lab-spark-01", key, "172.29.0.11")
    assert fake.calls[1:] == [("start", "lab-spark-01")]


def test_a_host_made_for_another_key_is_removed_with_its_volumes_and_made_anew(tmp_path, monkeypatch, capsys):
    key = lab_key(tmp_path, "AAAAC3NzaC1lZDI1NTE5AAAAIthis")
    other = lab_key(tmp_path / "..", "AAAAC3NzaC1lZDI1NTE5AAAAIother")
    assert lab.key_id(other) != lab.key_id(key)
    fake = FakeDocker(lab.key_id(other))
    monkeypatch.setattr(lab, "docker", fake)
    lab.start_host("lab", "lab-spark-01", key, "172.29.0.11")
    verbs = [call[:2] for call in fake.calls]
    assert ("start", "lab-spark-01") not in fake.calls
    assert verbs[1:4] == [("rm", "-f"), ("volume", "rm"), ("run", "-d")]
    assert "lab-spark-01-docker" in fake.calls[2]
    run = fake.calls[3]
    assert f"specdec.lab.key={lab.key_id(key)}" in run
    # the new host lets this key in
    assert fake.calls[-1][:2] == ("exec", "-i")
    assert "made for another lab key" in capsys.readouterr().out


def test_a_host_from_before_the_key_label_is_made_anew(tmp_path, monkeypatch):
    key = lab_key(tmp_path, "AAAAC3NzaC1lZDI1NTE5AAAAIthis")
    fake = FakeDocker("<no value>")
    monkeypatch.setattr(lab, "docker", fake)
    lab.start_host("lab", "lab-spark-01", key, "172.29.0.11")
    assert [call[:2] for call in fake.calls][1:3] == [("rm", "-f"), ("volume", "rm")]
