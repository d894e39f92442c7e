# shournal Docker edition: sourced by /etc/bash.bashrc and /etc/zsh/zshrc,
# i.e. by every interactive shell of the container.
# SHOURNAL_DOCKER_UNRECORDED=1 (set by the entrypoint when the user asked
# for an unrecorded shell) skips it.
case $- in *i*) ;; *) return 0 2>/dev/null || true ;; esac
if [ -z "${SHOURNAL_DOCKER_UNRECORDED-}" ]; then
    if [ -n "${BASH_VERSION-}" ]; then
        . /usr/share/shournal/shournal.bash && SHOURNAL_ENABLE
    elif [ -n "${ZSH_VERSION-}" ]; then
        . /usr/share/shournal/shournal.zsh && SHOURNAL_ENABLE
    fi
fi
