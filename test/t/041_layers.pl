# 041_layers.pl: the source tree keeps its layers.  Reads the C files as
# text (no server): each function defined outside a file and called from
# another is an arrow between files.  Checks that no arrow runs up the
# layers the README's "How it works" draws, that no files call each other
# in a circle, that no function is over 120 lines, and that each header
# declares only what the files of its own layer define.

use strict;
use warnings FATAL => 'all';

use FindBin;
use File::Find;
use Test::More;

my $top = "$FindBin::RealBin/../..";

# what each layer may call, besides itself
my %may = (
	api => [qw(masking shmem common)],
	hooks => [qw(shmem common)],
	worker => [qw(masking shmem common)],
	clone => [qw(masking shmem common)],
	masking => [qw(shmem common)],
	shmem => [qw(common)],
	common => [],);

my @files;
find(sub { push @files, $File::Find::name if /\.c$/ }, "$top/src");
@files = sort map { s{^\Q$top\E/}{}r } @files;
ok(scalar(@files) > 40, scalar(@files) . ' C files');

sub layer
{
	my ($file) = @_;
	return 'top' if $file eq 'src/pgsandbox.c';
	return $file =~ m{^src/([a-z]+)/} ? $1 : 'none';
}

# functions defined at file level, the return type on the line before
my (%defined_in, %text, @long);
foreach my $file (@files)
{
	open my $fh, '<', "$top/$file" or die "$file: $!";
	my @lines = <$fh>;
	close $fh;
	$text{$file} = join('', @lines);
	for my $i (1 .. $#lines)
	{
		next unless $lines[$i] =~ /^([a-z_][a-z0-9_]*)\(/;
		my $name = $1;
		next if $lines[ $i - 1 ] =~ /^(?:#|\s|$)/ || $lines[ $i - 1 ] =~ /;\s*$/;
		# its length, to the closing brace in the first column
		my $end = $i;
		$end++ while $end < $#lines && $lines[$end] !~ /^}/;
		push @long, "$file: $name (" . ($end - $i + 1) . ' lines)' if $end - $i + 1 > 120;
		next if $lines[ $i - 1 ] =~ /\bstatic\b/;
		$defined_in{$name} = $file;
	}
}
ok(scalar(keys %defined_in) > 200, scalar(keys %defined_in) . ' functions defined for other files');
is(join("\n", @long), '', 'no function is over 120 lines');

my (%arrows, @up);
foreach my $file (@files)
{
	my %seen;
	while ($text{$file} =~ /\b([a-z_][a-z0-9_]*)\s*\(/g)
	{
		my $to = $defined_in{$1};
		next if !defined $to || $to eq $file || $seen{"$to $1"}++;
		$arrows{$file}{$to} = 1;
		my ($from_layer, $to_layer) = (layer($file), layer($to));
		next if $from_layer eq 'top' || $from_layer eq $to_layer;
		push @up, "$file -> $to ($1)"
		  unless grep { $_ eq $to_layer } @{ $may{$from_layer} // [] };
	}
}
is(join("\n", grep { layer($_) eq 'none' } @files), '', 'every file but pgsandbox.c sits in a layer');
is(join("\n", @up), '', 'no file calls a layer above its own, or beside it');

# circles: a depth-first search of the arrows
my (%state, @circles);
sub visit
{
	my ($file, @path) = @_;
	$state{$file} = 1;
	foreach my $to (sort keys %{ $arrows{$file} // {} })
	{
		if (($state{$to} // 0) == 1)
		{
			my @from = @path[ (grep { $path[$_] eq $to } 0 .. $#path)[0] .. $#path ];
			push @circles, join(' -> ', @from, $file, $to) if @from;
			push @circles, "$file -> $to" unless @from;
		}
		visit($to, @path, $file) unless $state{$to};
	}
	$state{$file} = 2;
}
visit($_) foreach grep { !$state{$_} } @files;
is(join("\n", @circles), '', 'no files call each other, directly or in a circle');

# each header declares the functions of one layer
my %header_layer = (
	'sbx_common.h' => 'common',
	'sbx_roles.h' => 'common',
	'sbx_spi.h' => 'common',
	'sbx_schedule.h' => 'common',
	'sbx_conn.h' => 'common',
	'sbx_shmem.h' => 'shmem',
	'sbx_masking.h' => 'masking',
	'pii.h' => 'masking',
	'sbx_clone.h' => 'clone',
	'sbx_worker.h' => 'worker',
	'sbx_hooks.h' => 'hooks',
	'sbx_api.h' => 'api',);
my (@astray, @unmapped);
opendir my $dh, "$top/include" or die "include: $!";
foreach my $header (sort grep { /\.h$/ && $_ ne 'pg_compat.h' } readdir $dh)
{
	my $want = $header_layer{$header};
	push @unmapped, $header unless defined $want;
	next unless defined $want;
	open my $fh, '<', "$top/include/$header" or die "$header: $!";
	my $text = do { local $/; <$fh> };
	close $fh;
	$text =~ s{/\*.*?\*/}{}gs;
	while ($text =~ /^(?:pg_noreturn\s+)?extern\b[^;(]*?\b([a-z_][a-z0-9_]*)\s*\(/mg)
	{
		my $in = $defined_in{$1};
		push @astray, "$header: $1 (" . ($in // 'not defined') . ')'
		  unless defined $in && layer($in) eq $want;
	}
}
closedir $dh;
is(join("\n", @unmapped), '', 'every header belongs to a layer');
is(join("\n", @astray), '', 'every header declares only what its layer defines');

done_testing();
