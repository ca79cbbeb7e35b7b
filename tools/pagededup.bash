# bash completion for pagededup and pagededupfs (installed as
# share/bash-completion/completions/pagededup and .../pagededupfs).

_pagededup()
{
	local cur prev words cword
	_init_completion || return
	local commands="mkfs stats fsck compact simhash near attrs blobs dups clusters export import urlseen version help"
	if [ "$cword" -eq 1 ]; then
		COMPREPLY=($(compgen -W "$commands --help --version" -- "$cur"))
		return
	fi
	local cmd=${words[1]} opts=""
	case $cmd in
	mkfs) opts="--expected-pages --fpr --fmax --max-leaf-kib --filter-lines --near-distance --help" ;;
	stats) opts="--json -h --human-readable --help" ;;
	fsck) opts="--deep --repair --mem --help" ;;
	urlseen) opts="--filter --fpr --check --help" ;;
	blobs) opts="--cat --help" ;;
	compact) opts="--share --min-dead --all --level --no-cold-deltas --window --help" ;;
	dups|clusters) opts="--json --csv --min-size --help" ;;
	export) opts="-o --output --max-size --cdxj --level --no-gzip --help" ;;
	import) opts="-C --directory --help" ;;
	help) COMPREPLY=($(compgen -W "$commands" -- "$cur")); return ;;
	*) opts="--help" ;;
	esac
	case $prev in
	--expected-pages|--fpr|--fmax|--max-leaf-kib|--near-distance) return ;;
	--filter-lines) COMPREPLY=($(compgen -W "1 2" -- "$cur")); return ;;
	--filter) _filedir; return ;;
	-o|--output) _filedir warc.gz; return ;;
	-C|--directory) _filedir -d; return ;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$opts" -- "$cur"))
		return
	fi
	case $cmd in
	mkfs|stats|fsck|compact|blobs|dups|clusters) _filedir -d ;;
	*) _filedir ;;
	esac
}
complete -F _pagededup pagededup

_pagededupfs()
{
	local cur prev words cword
	_init_completion || return
	if [ "$prev" = -o ]; then
		local o="nodedup sync_blobs sync_ms= mapsize_mb= lmdb_rewrite_mb= sign_queue= no_sign_thread entry_timeout= attr_timeout= negative_timeout= no_uring uring_threads= pack_level= pack_mb= nursery_level= nursery_raw_mb= nursery_mb= nonursery delta= delta_candidates= delta_window= compact= compact_min_kb= compact_period_ms= nocompact allow_other auto_unmount"
		compopt -o nospace
		COMPREPLY=($(compgen -W "$o" -- "${cur##*,}"))
		[ "${cur%,*}" != "$cur" ] && COMPREPLY=("${COMPREPLY[@]/#/${cur%,*},}")
		return
	fi
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "-f -d -o --help --version" -- "$cur"))
		return
	fi
	_filedir -d
}
complete -F _pagededupfs pagededupfs
