
# 048_docs_sql.pl: every SQL example of the documentation runs, and gives
# what the page shows.
#
# In README.md and docs/*.md, a block fenced as ```sql is an example (one
# fenced ```sql norun is an illustration: another host, a shell's
# variable).  The examples of a page run in order, in one psql session (so
# that \gset variables pass from one to the next), on a new server of their
# own, after test/docs/<page>.sql if there is one (the databases the page
# speaks of).  An example followed by a block fenced ```output must end
# with that, as psql prints it aligned: the results of its last statements
# (a page need not show the empty result of each void call before them);
# "…" in it stands for any text of a line.

use strict;
use warnings FATAL => 'all';

use File::Basename qw(basename);
use FindBin;
use lib $FindBin::RealBin;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $top = "$FindBin::RealBin/../..";
my $su = superuser_name();

sub slurp
{
	my ($path) = @_;
	open my $fh, '<', $path or die "$path: $!";
	local $/;
	return <$fh>;
}

# The examples of a page: a list of [sql, expected output or undef].
sub examples
{
	my ($text) = @_;
	my @blocks;
	while ($text =~ /^```(\S*)([^\n]*)\n(.*?)^```[ \t]*$/msg)
	{
		my ($lang, $info, $body) = ($1, $2, $3);
		if ($lang eq 'sql' && $info !~ /\bnorun\b/)
		{
			push @blocks, [ $body, undef ];
		}
		elsif ($lang eq 'output' && @blocks && !defined $blocks[-1][1])
		{
			$blocks[-1][1] = $body;
		}
	}
	return @blocks;
}

# Does psql's output match the page's ("…" is any text of a line)?
sub matches
{
	my ($got, $want) = @_;
	my @g = map { s/\s+$//r } split /\n/, $got;
	my @w = map { s/\s+$//r } split /\n/, $want;
	return 0 unless @g >= @w;
	# the tail, from the start of a result
	my $skip = @g - @w;
	return 0 unless $skip == 0 || $g[ $skip - 1 ] eq '';
	@g = @g[ $skip .. $#g ];
	for my $i (0 .. $#w)
	{
		my $re = join '.*', map { quotemeta } split /…/, $w[$i], -1;
		return 0 unless $g[$i] =~ /^$re$/;
	}
	return 1;
}

my @pages = ("$top/README.md", sort glob("$top/docs/*.md"));
my $ran = 0;
foreach my $page (@pages)
{
	my $name = basename($page, '.md');
	$name = 'README' if $page eq "$top/README.md";
	my @blocks = examples(slurp($page));
	next unless @blocks;

	my $node = sandbox_node("docs_" . lc($name =~ s/\W/_/gr));
	my $fixture = "$top/test/docs/$name.sql";
	if (-e $fixture)
	{
		my ($ret, $out, $err) = $node->psql('postgres', slurp($fixture),
			extra_params => [ '-v', 'ON_ERROR_STOP=1' ]);
		is($ret, 0, "$name: its databases are made ($fixture)") or diag $err;
	}

	# every example in one session, each told from the next by a marker
	my $script = '';
	for my $i (0 .. $#blocks)
	{
		$script .= "\\echo '\@\@example $i\@\@'\n$blocks[$i][0]\n";
	}
	$script .= "\\echo '\@\@end\@\@'\n";
	my ($out, $err) = ('', '');
	local %ENV = (%ENV, PGHOST => $node->host, PGPORT => $node->port);
	IPC::Run::run(
		[ $node->installed_command('psql'), '-X', '-q', '-v', 'ON_ERROR_STOP=1',
		  '-d', 'postgres', '-U', $su, '-f', '-' ],
		'<', \$script, '>', \$out, '2>', \$err, IPC::Run::timeout(600));
	my $ret = $? >> 8;
	# what the page's examples printed, for whoever writes its outputs
	open my $fh, '>', "$PostgreSQL::Test::Utils::tmp_check/docs_$name.out" or die $!;
	print $fh $out;
	close $fh;
	is($ret, 0, "$name: its " . scalar(@blocks) . " examples run") or diag $err;
	my %printed;
	while ($out =~ /^\@\@example (\d+)\@\@\n(.*?)(?=^\@\@(?:example \d+|end)\@\@$)/msg)
	{
		$printed{$1} = $2;
	}
	for my $i (0 .. $#blocks)
	{
		next unless defined $blocks[$i][1];
		my $got = $printed{$i} // '';
		$got =~ s/\n+$//;
		(my $want = $blocks[$i][1]) =~ s/\n+$//;
		ok(matches($got, $want), "$name: example " . ($i + 1) . " prints what the page shows")
		  or diag("printed:\n$got\nthe page shows:\n$want");
	}
	$ran += @blocks;
	$node->stop;
}
cmp_ok($ran, '>=', 15, "$ran examples ran");

done_testing();
